"""Shared fixtures; above all, a leak check after every test.

No test may leave a process behind: after each test, every new child of this process
and every live member of a process group the stdio transport created during the test
must be gone. Survivors fail the test by name and are killed. One ``/proc`` scan
before and after each test (a few ms); a short poll only when something is found,
because SIGKILL is delivered asynchronously.

Zombies of *other* parents are ignored: a killed grandchild is re-parented to PID 1,
and a PID 1 that does not reap (as in some containers) keeps it as a zombie; it holds
no resources but a pid. A zombie *child of ours* is a leak (nobody reaped it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from hypothesis import settings

from actors.transports.pidfiles import ProcStat, read_proc_stat
from actors.transports.process_group import spawned_process_groups

if TYPE_CHECKING:
    from tests.support.browser import Page
    from tests.support.postgres import Cluster
    from tests.support.traces import Traces

# Property tests check behaviour, not speed: a 200 ms per-example deadline fails them
# whenever the machine is busy (performance is measured in benchmarks/, not asserted).
settings.register_profile("project", deadline=None)
settings.load_profile("project")

MINI_SERVER = Path(__file__).parent / "servers" / "mini_server.py"
_SETTLE_S = 0.5


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "leaves_processes: skip the after-test check for leaked processes")


@pytest.fixture
def mini_server_argv() -> list[str]:
    """Command line that starts our stdlib-only MCP test server."""
    return [sys.executable, str(MINI_SERVER)]


@pytest.fixture
def traces() -> Iterator[Traces]:
    """Traces on, recorded in memory (``tests/support/traces.py``; OpenTelemetry is
    imported only by the tests that ask for it)."""
    from tests.support.traces import recording

    with recording() as made:
        yield made


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A throwaway PostgreSQL cluster per test process (``tests/support/postgres.py``; imported
    here, not above, as ``traces`` is: this file also runs where ``tests`` is no package)."""
    from tests.support.postgres import start_cluster

    running = start_cluster()
    try:
        yield running.cluster
    finally:
        running.stop()


@pytest.fixture
def postgres_url(pg_cluster: Cluster) -> Iterator[str]:
    """``postgresql://mcp:<password>@127.0.0.1:<port>/<db>``: a fresh empty database for this
    test, dropped after it; skips with the reason when PostgreSQL or psycopg is missing."""
    from tests.support.postgres import fresh_database

    with fresh_database(pg_cluster) as url:
        yield url


def _all_processes() -> list[ProcStat]:
    table = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_proc_stat(int(entry))
            if stat is not None:
                table.append(stat)
    return table


def _survivors(old_children: set[int], groups: set[int]) -> list[ProcStat]:
    me = os.getpid()
    return [
        p
        for p in _all_processes()
        if (p.ppid == me and p.pid not in old_children)
        or (p.pgrp in groups and p.state != "Z" and p.pid != me)
    ]


def _describe(stat: ProcStat) -> str:
    try:
        with open(f"/proc/{stat.pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = "?"
    return f"pid={stat.pid} ppid={stat.ppid} pgrp={stat.pgrp} state={stat.state} cmd={cmd[:120]}"


def _kill(survivors: list[ProcStat]) -> None:
    me = os.getpid()
    for p in survivors:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, signal.SIGKILL)
    # Reap our own children, bounded, so they do not haunt the next test.
    deadline = time.monotonic() + _SETTLE_S
    pending = {p.pid for p in survivors if p.ppid == me}
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                pending.discard(pid)
        time.sleep(0.01)


@pytest.fixture(autouse=True)
def no_leaked_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that leaves a child process or a member of a spawned group alive."""
    if request.node.get_closest_marker("leaves_processes"):
        yield
        return
    me = os.getpid()
    old_children = {p.pid for p in _all_processes() if p.ppid == me}
    old_groups = set(spawned_process_groups())
    yield
    groups = set(spawned_process_groups()) - old_groups
    survivors = _survivors(old_children, groups)
    deadline = time.monotonic() + _SETTLE_S
    while survivors and time.monotonic() < deadline:
        time.sleep(0.01)  # a SIGKILLed process may need a moment to disappear
        survivors = _survivors(old_children, groups)
    if survivors:
        report = "\n  ".join(_describe(p) for p in survivors)  # before they are gone
        _kill(survivors)
        pytest.fail(f"processes outlived the test:\n  {report}")


@pytest.fixture
def thread_safe_clock() -> trio.testing.MockClock:
    """Virtual time for tests that also run worker threads (the store writes in one).

    ``autojump_clock`` jumps the moment every task is blocked, also while a task waits
    for a thread, so a 5 s deadline around a 1 ms disk write would fire. This clock
    jumps only after 50 ms of real idleness: threads finish first, timers still fly.
    """
    return trio.testing.MockClock(autojump_threshold=0.05)


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """A test that runs `cli.main(["serve"])` installs a root handler on pytest's captured
    stderr, which is closed after the test: put the root logger back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Page]:
    """A headless chromium page for this test (``tests/support/browser.py``), screenshots in
    ``<tmp_path>/screenshots``; skips with the reason when chromium or playwright is missing."""
    from tests.support.browser import headless_page

    async with headless_page(tmp_path / "screenshots") as page:
        yield page
