"""A server that daemonizes a grandchild (its own session, SIGTERM ignored, our pipes
kept open) and then exits must not hide its death, and must leave no process behind.
Real processes, real clock."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import trio

from actors.connection.states import State
from actors.spec import Scope, ServerSpec
from actors.transports import spawned as spawned_module
from actors.transports import stdio
from actors.transports.escapees import (
    MARKER_ENV,
    acquire_subreaper,
    is_subreaper,
    read_marker,
    release_subreaper,
)
from actors.transports.instances import InstanceLock
from actors.transports.pidfiles import read_proc_stat
from actors.transports.raw_stdio import RawStdio
from actors.transports.spawn import Launch
from supervisor import Supervisor
from supervisor.service import recover_dead_instances
from supervisor.settings.model import Config
from supervisor.store.folding import NAME as FOLDER
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")
BOUND_S = 5.0  # a bound for the test; the event itself must come well under 1 s


def mini_spec(name: str, *flags: str) -> ServerSpec:
    return ServerSpec(
        name,
        command=(sys.executable, MINI, *flags),
        trusted=True,
        shutdown_grace_s=0.5,
        call_timeout_s=30.0,
        reconnect_schedule_s=(30.0,),
    )


def escaped_pid(last_error: str | None) -> int:
    found = re.search(r"escaped child pid=(\d+)", last_error or "")
    assert found is not None, last_error
    return int(found[1])


@contextlib.contextmanager
def killed_at_the_end(pids: list[int]) -> Iterator[None]:
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def test_the_servers_exit_answers_the_call_in_flight_at_once(tmp_path: Path) -> None:
    escaped: list[int] = []
    with killed_at_the_end(escaped):
        config = Config(servers=(mini_spec("esc", "--escape"),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            async with sup.session() as session:
                turn = await session.begin_turn()
                began = trio.current_time()
                with trio.fail_after(BOUND_S):  # the call timeout is 30 s
                    result = await turn.call("esc_echo", {"text": "hi"})
                    took = trio.current_time() - began
                    await sup.router.cell.wait_until(lambda c: c.servers["esc"].state is State.BACKOFF)
            escaped.append(escaped_pid(sup.servers()["esc"].last_error))
            assert result.error is not None and result.error.code == "unavailable"
            assert result.error.message == "MCP server stopped responding during tools/call echo"
            assert took < 1.0


def marked(instance: str) -> list[int]:
    """Live processes carrying a marker of ``instance`` (zombies have no environment),
    but its audit folder, which lives as long as the supervisor does."""
    return [
        pid
        for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
        if (read_marker(pid) or "").partition(":")[0] == instance
        and read_marker(pid) != f"{instance}:{FOLDER}"
    ]


async def gone(instance: str) -> None:
    """Wait (bounded) until no live process carries a marker of ``instance``."""
    with trio.fail_after(BOUND_S):
        while True:
            if not marked(instance):
                return
            await trio.sleep(0.01)


async def escape_in_a_call(sup: Supervisor, server: str, tenant: str = "default") -> int:
    """Call ``server`` (a mini_server --escape) once; the daemon's pid."""
    async with sup.session(tenant=tenant) as session:
        turn = await session.begin_turn()
        with trio.fail_after(BOUND_S):
            result = await turn.call(f"{server}_echo", {"text": "hi"})
    assert result.error is not None and "stopped responding" in result.error.message
    with trio.fail_after(BOUND_S):
        await sup.router.cell.wait_until(lambda c: c.servers[server].state is State.BACKOFF)
    return escaped_pid(sup.servers()[server].last_error)


async def test_every_server_carries_the_marker_of_its_instance(tmp_path: Path) -> None:
    config = Config(servers=(mini_spec("plain"),))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        assert (await turn.call("plain_echo", {"text": "hi"})).ok
        status = await sup.connection_status("plain")
        assert status is not None and status.transport is not None
        pid = int(re.search(r"pid=(\d+)", status.transport)[1])  # type: ignore[index]
        assert read_marker(pid) == f"{sup.instance_id}:plain"


async def test_a_subreaper_kills_and_reaps_the_escapee_at_the_servers_teardown(tmp_path: Path) -> None:
    escaped: list[int] = []
    with killed_at_the_end(escaped):
        config = Config(servers=(mini_spec("esc", "--escape"),))
        async with Supervisor.open(config, state_dir=tmp_path, subreaper=True) as sup:
            assert is_subreaper()
            escaped.append(await escape_in_a_call(sup, "esc"))
            assert sup.instance_id is not None
            await gone(sup.instance_id)  # while the supervisor runs: at the teardown
            assert read_proc_stat(escaped[0]) is None  # reaped, not left a zombie of ours
        assert not is_subreaper()  # the process-wide setting is put back


async def test_without_a_subreaper_the_escapee_dies_when_the_supervisor_closes(tmp_path: Path) -> None:
    escaped: list[int] = []
    with killed_at_the_end(escaped):
        config = Config(servers=(mini_spec("esc", "--escape"),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            escaped.append(await escape_in_a_call(sup, "esc"))
            assert sup.instance_id is not None
            assert marked(sup.instance_id) == escaped  # out of reach while it runs
        await gone(sup.instance_id)


async def test_servers_sharing_a_marker_keep_their_escapees_until_the_last_one_ends(tmp_path: Path) -> None:
    """Session-scoped servers of one name share a marker: an escapee cannot be told from
    the other live server's own helpers, so only the last teardown takes it."""
    escaped: list[int] = []
    with killed_at_the_end(escaped):
        spec = attrs.evolve(mini_spec("esc", "--escape"), scope=Scope.SESSION)
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path, subreaper=True) as sup:
            assert sup.instance_id is not None
            async with sup.session() as other:
                await other.begin_turn()  # its own esc, live, with the same marker
                async with sup.session() as first:
                    turn = await first.begin_turn()
                    with trio.fail_after(BOUND_S):
                        result = await turn.call("esc_echo", {"text": "hi"})
                    assert result.error is not None and "stopped responding" in result.error.message
                escaped.extend(marked(sup.instance_id))
                assert len(escaped) == 2  # the other session's server, and the escapee
            await gone(sup.instance_id)


async def test_a_start_kills_the_escapees_of_a_dead_instance_and_no_others(tmp_path: Path) -> None:
    dead = InstanceLock.acquire(tmp_path, "serve")
    os.close(dead._fd)  # it dies without cleaning up
    dead._fd = -1
    with InstanceLock.acquire(tmp_path, "serve") as live:
        procs = {
            owner: await trio.lowlevel.open_process(
                ["sleep", "60"], env={**os.environ, MARKER_ENV: f"{owner}:srv"}, start_new_session=True
            )
            for owner in (dead.id, live.id)
        }
        try:
            await recover_dead_instances(tmp_path)
            with trio.fail_after(BOUND_S):
                assert await procs[dead.id].wait() == -signal.SIGKILL
            assert procs[live.id].returncode is None
        finally:
            for proc in procs.values():
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()


async def test_a_teardown_spares_a_server_of_the_same_name_still_being_spawned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The spawn runs in a thread: the new process is our child before it is counted
    as a live server. A teardown of the only other live server with that marker (a
    bridge session or a session-scoped server closing while the next one starts) must
    not take it for an escapee of its own and SIGKILL it."""
    real_spawn = spawned_module.spawn
    spawned, first_closed = trio.Event(), trio.Event()
    answers: list[list[bytes]] = []
    spawns: list[int] = []

    async def spawn_then_wait(spec: ServerSpec, launch: Launch) -> trio.Process:
        process = await real_spawn(spec, launch)
        spawns.append(process.pid)
        if len(spawns) == 2:
            spawned.set()
            await first_closed.wait()  # the first server's teardown runs in this window
        return process

    async def second() -> None:
        async with stdio.open_stdio_transport(mini_spec("same"), instance="t", kind=RawStdio) as two:
            await two.send_line(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
            answers.append(await two.receive_lines())  # [] if it was killed

    monkeypatch.setattr(spawned_module, "spawn", spawn_then_wait)
    assert acquire_subreaper()
    try:
        with trio.fail_after(BOUND_S):
            async with trio.open_nursery() as nursery:
                async with stdio.open_stdio_transport(mini_spec("same"), instance="t", kind=RawStdio):
                    nursery.start_soon(second)
                    await spawned.wait()
                first_closed.set()
    finally:
        release_subreaper()
    assert answers and answers[0], "the second server was killed by the first one's teardown"
    assert b'"id":1' in answers[0][0].replace(b" ", b"")
