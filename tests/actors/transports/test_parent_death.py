"""A SIGKILLed supervisor leaves no server running: each server gets the parent-death
signal (Linux), set so that it fires when the supervisor dies and at no other time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from actors.connection.states import State
from actors.spec import ServerSpec, Start
from actors.transports.escapees import read_marker
from actors.transports.instances import instances_dir
from actors.transports.pidfiles import is_running, read_proc_stat
from supervisor import Supervisor
from supervisor.settings.model import Config
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")
CLI = [sys.executable, "-m", "supervisor.cli"]
BOUND_S = 20.0  # for the test; the server dies within milliseconds of the supervisor

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")


def children_of(pid: int, program: str) -> list[int]:
    """Children of ``pid`` that run ``program`` (others come and go: ``serve`` may start
    short-lived helpers, and a child between fork and exec is not the server yet)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or (stat := read_proc_stat(int(entry))) is None or stat.ppid != pid:
            continue
        try:
            argv0 = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if os.path.basename(argv0) == program.encode():
            found.append(int(entry))
    return found


def test_a_sigkilled_serve_leaves_no_server_running(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    # A server that notices nothing when its supervisor dies: it never reads its stdin
    # and never writes (a write to a dead reader would end it). Only a signal ends it.
    stubborn = ["sleep", "1000"]
    config.write_text(json.dumps({"servers": {"stubborn": {"command": stubborn, "start": "eager"}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_SUPERVISOR")}
    state = str(tmp_path / "state")
    argv = [*CLI, "serve", "--config", str(config), "--bind", "127.0.0.1:0", "--state-dir", state]
    serve = subprocess.Popen(argv, stderr=subprocess.DEVNULL, env=env)
    servers: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + BOUND_S
        while not (found := children_of(serve.pid, "sleep")) and time.monotonic() < deadline:
            time.sleep(0.01)
        (pid,) = found
        stat = read_proc_stat(pid)
        assert stat is not None
        servers.append((pid, stat.start_time))
        os.kill(serve.pid, signal.SIGKILL)
        serve.wait(BOUND_S)
        deadline = time.monotonic() + BOUND_S
        while is_running(pid, stat.start_time) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not is_running(pid, stat.start_time), "the server outlived its SIGKILLed supervisor"
    finally:
        serve.kill()
        serve.wait()
        for pid, start in servers:
            if is_running(pid, start):
                os.kill(pid, signal.SIGKILL)


async def test_servers_do_not_die_with_the_threads_that_started_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent-death signal fires when the *thread* that forked the child ends. trio's
    worker threads end after an idle while (10 s; 50 ms here): a server forked in one
    would be killed soon after its start."""
    cache = pytest.importorskip("trio._core._thread_cache")
    monkeypatch.setattr(cache, "IDLE_TIMEOUT", 0.05)
    spec = ServerSpec("mini", command=(sys.executable, MINI), start=Start.EAGER, trusted=True)
    async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup:
        with trio.fail_after(BOUND_S):
            await sup.router.cell.wait_until(lambda c: c.servers["mini"].state is State.STEADY)
        for _ in range(3):  # cycle trio's workers: each ends 50 ms after its last job
            await trio.to_thread.run_sync(time.sleep, 0.01)
            await trio.sleep(0.2)
        view = sup.servers()["mini"]
        assert view.state is State.STEADY and view.reconnects == 0
        async with sup.session() as session:
            turn = await session.begin_turn()
            assert (await turn.call("mini_echo", {"text": "still here"})).ok


def test_what_a_sigkilled_serves_servers_left_behind_is_killed_by_the_next_start(tmp_path: Path) -> None:
    """The server dies with serve (the parent-death signal); a daemon it left outside its
    group survives both, reparented to init, until a start claims the dead instance."""
    config = tmp_path / "config.json"
    daemonizing = ["sh", "-c", "setsid sleep 1000 </dev/null >/dev/null 2>&1 & exec sleep 1000"]
    config.write_text(json.dumps({"servers": {"d": {"command": daemonizing, "start": "eager"}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_SUPERVISOR")}
    state = tmp_path / "state"
    argv = [*CLI, "serve", "--config", str(config), "--bind", "127.0.0.1:0", "--state-dir", str(state)]
    serve = subprocess.Popen(argv, stderr=subprocess.DEVNULL, env=env)
    instance = ""
    try:
        deadline = time.monotonic() + BOUND_S
        while not (locks := list(instances_dir(state).glob("*.lock"))) and time.monotonic() < deadline:
            time.sleep(0.01)
        instance = locks[0].name.removesuffix(".lock")
        while len(marked_by(instance)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(marked_by(instance)) == 3  # the server, its daemon and the audit folder
        os.kill(serve.pid, signal.SIGKILL)
        serve.wait(BOUND_S)
        deadline = time.monotonic() + BOUND_S
        while len(marked_by(instance)) > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(marked_by(instance)) == 1  # the server and the folder died with serve; the daemon lives on

        async def start() -> None:
            async with Supervisor.open(Config(), state_dir=state):
                pass

        trio.run(start)
        deadline = time.monotonic() + BOUND_S
        while marked_by(instance) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marked_by(instance) == []
    finally:
        serve.kill()
        serve.wait()
        for pid in marked_by(instance) if instance else ():
            os.kill(pid, signal.SIGKILL)


def marked_by(instance: str) -> list[int]:
    """Live processes carrying a marker of ``instance``."""
    return [
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit() and (read_marker(int(entry)) or "").partition(":")[0] == instance
    ]
