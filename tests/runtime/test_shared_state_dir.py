"""Several supervisor instances, one state directory: each start reaps only the servers of
dead instances, and the database takes several writing processes at once."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.connection.states import State
from actors.spec import ServerSpec, Start
from actors.transports.instances import InstanceLock, instance_is_live, instances_dir
from actors.transports.pidfiles import pids_dir, read_pidfile, write_pidfile
from supervisor import Supervisor
from supervisor.runtime.state_dir import StateError
from supervisor.service import recover_dead_instances
from supervisor.settings.model import Config
from supervisor.store import Store, StoreError
from supervisor.store.folding import NAME as FOLDER
from tests.support.paths import REPO

ROOT = REPO
MINI = str(ROOT / "tests" / "servers" / "mini_server.py")
BOUND_S = 10.0


def eager(name: str) -> ServerSpec:
    return ServerSpec(name, command=(sys.executable, MINI), start=Start.EAGER, shutdown_grace_s=0.5)


async def steady(sup: Supervisor, *names: str) -> None:
    with trio.fail_after(BOUND_S):
        await sup.router.cell.wait_until(lambda c: all(c.servers[n].state is State.STEADY for n in names))


def pidfiles(state: Path) -> list[Path]:
    """The servers' pidfiles (not the audit folder's, which comes and goes with its supervisor)."""
    found = ((path, read_pidfile(path)) for path in pids_dir(state).glob("*.json"))
    return sorted(path for path, record in found if record is not None and record.server != FOLDER)


async def test_each_supervisor_holds_an_instance_lock_named_in_its_pidfiles(tmp_path: Path) -> None:
    config = Config(servers=(eager("a"),))
    async with Supervisor.open(config, state_dir=tmp_path, instance_kind="stdio") as sup:
        await steady(sup, "a")
        assert sup.instance_id is not None and instance_is_live(tmp_path, sup.instance_id)
        about = json.loads((instances_dir(tmp_path) / f"{sup.instance_id}.lock").read_text())
        assert about["kind"] == "stdio" and about["pid"] == os.getpid()
        (path,) = pidfiles(tmp_path)
        record = read_pidfile(path)
        assert record is not None and record.instance == sup.instance_id
    assert not instance_is_live(tmp_path, sup.instance_id)
    assert list(instances_dir(tmp_path).iterdir()) == [] and list(pids_dir(tmp_path).iterdir()) == []


async def test_an_instance_lock_that_cannot_be_taken_is_a_state_error(tmp_path: Path) -> None:
    instances_dir(tmp_path).write_text("in the way")
    with pytest.raises(StateError) as caught:
        async with Supervisor.open(Config(), state_dir=tmp_path):
            pytest.fail("started without an instance lock")
    where = instances_dir(tmp_path)
    assert str(caught.value).startswith(f"state error: {where}: cannot take this supervisor's instance lock")


async def test_two_instances_in_one_process_leave_each_other_alone(tmp_path: Path) -> None:
    async with Supervisor.open(Config(servers=(eager("a"),)), state_dir=tmp_path) as first:
        await steady(first, "a")
        (before,) = pidfiles(tmp_path)
        async with Supervisor.open(Config(servers=(eager("b"),)), state_dir=tmp_path) as second:
            await steady(second, "b")
            assert first.instance_id != second.instance_id
            assert before in pidfiles(tmp_path) and len(pidfiles(tmp_path)) == 2
        assert pidfiles(tmp_path) == [before]
        assert first.servers()["a"].state is State.STEADY


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def _dead_instance(state: Path) -> str:
    """An instance whose holder died without cleaning up (its lock file stays)."""
    lock = InstanceLock.acquire(state, "embedded")
    os.close(lock._fd)
    lock._fd = -1
    return lock.id


async def test_a_dead_instances_servers_are_reaped_even_while_its_process_lives(tmp_path: Path) -> None:
    """The instance, not the process, owns the servers: an instance of this very process
    that ended without its teardown (a stuck shutdown) leaves servers a later start in
    the same process must reap. The old owner check saw a live owner and kept them."""
    dead, live = _sleeper(), _sleeper()
    try:
        gone = _dead_instance(tmp_path)
        write_pidfile(tmp_path, pid=dead.pid, pgid=dead.pid, server="d", argv0="sleep", instance=gone)
        with InstanceLock.acquire(tmp_path, "embedded") as running:
            mine = running.id
            write_pidfile(tmp_path, pid=live.pid, pgid=live.pid, server="l", argv0="sleep", instance=mine)
            await recover_dead_instances(tmp_path)
            assert dead.wait(BOUND_S) == -signal.SIGTERM
            assert live.poll() is None and len(pidfiles(tmp_path)) == 1
        assert list(instances_dir(tmp_path).iterdir()) == []  # the dead instance was recovered
    finally:
        for proc in (dead, live):
            proc.kill()
            proc.wait()


NAMESPACED_INSTANCE = textwrap.dedent(
    """
    import sys, trio
    from pathlib import Path
    from actors.spec import ServerSpec, Start
    from supervisor import Supervisor
    from supervisor.settings.model import Config

    async def main() -> None:
        spec = ServerSpec("ns", command=(sys.executable, sys.argv[2]), start=Start.EAGER)
        async with Supervisor.open(Config(servers=(spec,)), state_dir=Path(sys.argv[1])) as sup:
            await sup.router.cell.wait_until(lambda c: c.servers["ns"].state.value == "steady")
            print("ready", flush=True)
            await trio.to_thread.run_sync(sys.stdin.read)  # until the test closes our stdin

    trio.run(main)
    """
)


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "true"]
    return subprocess.run(probe, capture_output=True, timeout=BOUND_S).returncode == 0


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not _unshare_works(), reason="needs user and pid namespaces"
)
async def test_a_live_instance_in_another_pid_namespace_keeps_its_pidfiles(tmp_path: Path) -> None:
    """A sandboxed editor or a container shares the state directory, but its pids mean
    nothing here: the old owner check found no such owner and deleted the live
    instance's pidfiles (and would have signalled any process that happened to match)."""
    argv = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]
    argv += [sys.executable, "-c", NAMESPACED_INSTANCE, str(tmp_path), MINI]
    other = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    assert other.stdin is not None and other.stdout is not None
    try:
        said = b""
        with trio.fail_after(BOUND_S):
            while not said.endswith(b"\n"):
                said += await other.stdout.receive_some()
        assert said == b"ready\n"
        (theirs,) = pidfiles(tmp_path)
        async with Supervisor.open(Config(), state_dir=tmp_path):
            pass
        assert pidfiles(tmp_path) == [theirs]
    finally:
        await other.stdin.aclose()
        with trio.fail_after(BOUND_S):
            assert await other.wait() == 0
    assert pidfiles(tmp_path) == []


WRITER = textwrap.dedent(
    """
    import sys, time
    from supervisor.store import Store
    from supervisor.store.records import AuditRow

    path, me, rows, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    while time.time() < start_at:  # every writer opens the (new) file at the same moment
        time.sleep(0.001)
    with Store.open(path) as store:
        for i in range(rows):
            store.add_audit([AuditRow(time.time(), "t", me, "tool", "s", "allow", "ok", 1, "0" * 64, 2, 3)])
            if i % 10 == 0:  # what `auth login` writes while `serve` audits
                store.save_oauth(f"{me}-{i}", "https://x.example/mcp", {"token": f"{me}-{i}"}, time.time())
            if i == rows // 2:
                with store.transaction():  # hold the write lock a while: the others must wait
                    store.set_pin(me, "tool", "f")
                    time.sleep(0.2)
    """
)


def test_several_processes_write_the_store_at_once_without_error_or_loss(tmp_path: Path) -> None:
    path = tmp_path / "supervisor.db"
    writers, rows = 4, 150
    start_at = time.time() + 1.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"w{n}", str(rows), str(start_at)],
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        for n in range(writers)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    with Store.open(path) as store:
        audit = store.audit_rows(limit=10_000)
        assert len(audit) == writers * rows
        assert {r.session for r in audit} == {f"w{n}" for n in range(writers)}
        for n in range(writers):
            for i in range(0, rows, 10):
                assert store.oauth_record(f"w{n}-{i}", "https://x.example/mcp") == {"token": f"w{n}-{i}"}
        assert set(store.pins()) == {(f"w{n}", "tool") for n in range(writers)}


def _open_at(path: str, go: Any, failures: Any) -> None:
    go.wait()
    try:
        Store.open(path).close()
    except StoreError as exc:
        failures.put(str(exc))


def test_processes_that_open_a_new_store_at_the_same_moment_all_succeed(tmp_path: Path) -> None:
    """Switching a new file to WAL needs an exclusive lock, and SQLite answers "locked" at
    once, without waiting out the busy timeout, to a process that holds a read lock and
    wants to upgrade while another does the same (it would deadlock). Several instances
    started together on a fresh state directory hit that."""
    context = multiprocessing.get_context("fork")
    failures = context.Queue()
    for round_ in range(12):
        path = str(tmp_path / f"round{round_}.db")
        go = context.Event()
        openers = [context.Process(target=_open_at, args=(path, go, failures)) for _ in range(6)]
        for opener in openers:
            opener.start()
        go.set()
        for opener in openers:
            opener.join(timeout=30)
            assert opener.exitcode == 0
    lost = []
    while not failures.empty():
        lost.append(failures.get())
    assert lost == []
