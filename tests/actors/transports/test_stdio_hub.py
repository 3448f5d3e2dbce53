"""StdioHub: one task serves every stdio server's stderr and exit (real subprocesses)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors.protocol.messages import Notification
from actors.redaction import Redactor
from actors.spec import ServerSpec
from actors.transport_errors import SpawnError
from actors.transports.connector import TransportConnector
from actors.transports.stdio import open_stdio_transport
from actors.transports.stdio_hub import StdioHub
from supervisor import Supervisor
from supervisor.settings.model import Config
from tests.actors.transports.test_stdio_transport import (
    BOUND_S,
    crash_leaving_a_grandchild,
    eventually,
    make_spec,
    read_all,
    wait_for_stderr,
)


def _watched(hub: StdioHub) -> tuple[int, int]:
    """(processes watched, descriptors in the selector)."""
    selector = hub._selector
    return len(hub._exits), 0 if selector is None else len(selector.get_map())


async def test_one_hub_serves_every_servers_stderr(mini_server_argv: list[str]) -> None:
    hub = StdioHub()
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(hub.run)
            spec = make_spec([*mini_server_argv, "--stderr-lines", "3"])
            async with (
                open_stdio_transport(spec, hub=hub) as a,
                open_stdio_transport(spec, hub=hub) as b,
                open_stdio_transport(spec, hub=hub) as c,
            ):
                for t in (a, b, c):
                    await wait_for_stderr(t, "stderr line 2")
                    assert t.stderr_tail() == ["stderr line 0", "stderr line 1", "stderr line 2"]
                # With pidfds: 3 exits and 6 descriptors (stderr + pidfd) in one selector.
                exits, fds = _watched(hub)
                assert exits == 3 and fds in (3, 6)
            assert _watched(hub) == (0, 0)  # every transport took its entries along
            nursery.cancel_scope.cancel()
    assert not hub.running


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "exit-task"])
async def test_a_crash_is_seen_through_the_hub_even_when_a_grandchild_holds_stdout(
    mini_server_argv: list[str], monkeypatch: pytest.MonkeyPatch, pidfd: bool
) -> None:
    if pidfd and not hasattr(os, "pidfd_open"):
        pytest.skip("this platform has no pidfd_open; the exit task is tested instead")
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)  # as on macOS
    hub = StdioHub()
    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(hub.run)
            async with open_stdio_transport(make_spec([*mini_server_argv, "--spawn-child"]), hub=hub) as t:
                await crash_leaving_a_grandchild(t)  # only the hub noticing the exit ends it
            nursery.cancel_scope.cancel()


async def test_a_failing_callback_is_dropped_and_the_others_go_on(caplog: pytest.LogCaptureFixture) -> None:
    hub = StdioHub()
    bad_r, bad_w = os.pipe()
    good_r, good_w = os.pipe()
    got: list[bytes] = []

    def bad() -> None:
        raise RuntimeError("a bug in one transport")

    try:
        with trio.fail_after(BOUND_S):
            async with trio.open_nursery() as nursery:
                await nursery.start(hub.run)
                hub.watch_readable(bad_r, bad)
                hub.watch_readable(good_r, lambda: got.append(os.read(good_r, 100)))
                os.write(bad_w, b"x")
                await trio.testing.wait_all_tasks_blocked()
                assert _watched(hub) == (0, 1)  # the failing one is no longer watched
                os.write(good_w, b"still served")
                await eventually(lambda: got == [b"still served"])
                nursery.cancel_scope.cancel()
    finally:
        for fd in (bad_r, bad_w, good_r, good_w):
            os.close(fd)
    assert "a callback failed" in caplog.text and "a bug in one transport" in caplog.text


async def test_a_transport_outlives_a_stopped_hub_and_keeps_the_last_stderr_words() -> None:
    code = (
        "import sys\n"
        "sys.stderr.write('before\\n'); sys.stderr.flush()\n"
        "sys.stdin.readline()\n"
        "sys.stderr.write('last words\\n'); sys.stderr.flush()\n"
    )
    hub = StdioHub()
    hub_scope = trio.CancelScope()

    async def run_hub(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with hub_scope:
            await hub.run(task_status=task_status)

    with trio.fail_after(BOUND_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(run_hub)
            async with open_stdio_transport(make_spec([sys.executable, "-c", code]), hub=hub) as t:
                await wait_for_stderr(t, "before")
                hub_scope.cancel()  # the hub goes first
                await trio.testing.wait_all_tasks_blocked()
                assert not hub.running
                await t.send([Notification("go")])
                assert await read_all(t) == []
            # Nobody read stderr since the hub stopped: the teardown took what the pipe held.
            assert t.stderr_tail() == ["before", "last words"]


async def test_without_a_running_hub_a_transport_runs_its_own(mini_server_argv: list[str]) -> None:
    stopped = StdioHub()
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(
            make_spec([*mini_server_argv, "--stderr-lines", "1"]), hub=stopped
        ) as t:
            await wait_for_stderr(t, "stderr line 0")
    assert not stopped.running and _watched(stopped) == (0, 0)


async def test_the_supervisor_serves_all_its_local_servers_from_one_hub(
    tmp_path: Path, mini_server_argv: list[str]
) -> None:
    specs = tuple(
        ServerSpec(name=f"m{i}", command=tuple(mini_server_argv), trusted=True, shutdown_grace_s=0.5)
        for i in range(3)
    )
    connector = TransportConnector(tmp_path)
    with trio.fail_after(BOUND_S * 2):
        async with Supervisor.open(Config(servers=specs), state_dir=tmp_path, connector=connector) as sup:
            async with sup.session() as session:
                await session.begin_turn()  # starts them all
            assert connector.hub.running
            assert _watched(connector.hub)[0] == 3
    assert not connector.hub.running


async def test_a_hub_that_stops_during_the_spawn_fails_the_start_and_leaves_nothing(
    mini_server_argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.transports import spawned, stdio

    hub = StdioHub()
    hub_scope = trio.CancelScope()
    real_spawn = spawned.spawn

    async def spawn_while_the_hub_stops(*args: Any) -> trio.Process:
        process = await real_spawn(*args)
        hub_scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        return process

    async def run_hub(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with hub_scope:
            await hub.run(task_status=task_status)

    monkeypatch.setattr(spawned, "spawn", spawn_while_the_hub_stops)
    stopping = "mini: not started, the supervisor is stopping"
    with trio.fail_after(BOUND_S), pytest.RaisesGroup(pytest.RaisesExc(SpawnError, match=stopping)):
        async with trio.open_nursery() as nursery:
            await nursery.start(run_hub)
            async with stdio._open(make_spec(mini_server_argv), None, Redactor(()), hub, None):
                pass  # pragma: no cover - never reached
    # the autouse leak check fails this test if the spawned server outlived it


async def test_a_descriptor_unwatched_by_an_earlier_callback_is_not_called_back() -> None:
    hub = StdioHub()
    first, second = os.pipe(), os.pipe()
    called: list[int] = []

    def ready(mine: int, other: int) -> None:
        called.append(mine)
        os.read(mine, 100)
        hub.unwatch(other)  # both are ready in the same round: whichever runs first wins

    try:
        with trio.fail_after(BOUND_S):
            async with trio.open_nursery() as nursery:
                await nursery.start(hub.run)
                hub.watch_readable(first[0], lambda: ready(first[0], second[0]))
                hub.watch_readable(second[0], lambda: ready(second[0], first[0]))
                os.write(first[1], b"x")
                os.write(second[1], b"y")
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()
    finally:
        for fd in (*first, *second):
            os.close(fd)
    assert len(called) == 1
