"""Shared servers added and removed while the supervisor runs (``Supervisor.add_server``,
``Supervisor.remove_server``), against real subprocess servers (real clock)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.connection.messages import Control
from actors.connection.states import State
from actors.spec import Scope, ServerSpec, Start
from actors.transports.pidfiles import read_proc_stat
from supervisor import Supervisor
from supervisor.settings.model import Config, ToolSearchSettings
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")
BOUND_S = 20.0
AT_ONCE_S = 5.0  # against a 30 s call: "answered at once"


def mini(name: str, **options: Any) -> ServerSpec:
    options.setdefault("shutdown_grace_s", 0.5)
    options.setdefault("trusted", True)
    return ServerSpec(name=name, command=(sys.executable, MINI), **options)


def config_of(*specs: ServerSpec) -> Config:
    return Config(servers=specs, tool_search=ToolSearchSettings(enabled=False))


async def pid_of(sup: Supervisor, name: str) -> int:
    status = await sup.connection_status(name)
    assert status is not None and status.transport is not None
    match = re.search(r"pid=(\d+)", status.transport)
    assert match, status.transport
    return int(match.group(1))


def alive(pid: int) -> bool:
    stat = read_proc_stat(pid)
    return stat is not None and stat.state != "Z"


def steady(*names: str) -> Any:
    return lambda catalog: all(catalog.servers[n].state is State.STEADY for n in names)


async def test_an_added_server_becomes_steady_and_callable_in_a_new_turn(tmp_path: Path) -> None:
    async with Supervisor.open(config_of(mini("a")), state_dir=tmp_path) as sup, sup.session() as session:
        before = await session.begin_turn()
        a_pid = await pid_of(sup, "a")
        with trio.fail_after(BOUND_S):
            await sup.add_server(mini("b"))
            assert sup.servers()["b"].state is State.IDLE  # lazy: it waits to be needed
            turn = await session.begin_turn()  # its tools are unknown: the turn starts it
            assert sup.servers()["b"].state is State.STEADY
            assert turn.is_available("b_add")
            result = await turn.call("b_add", {"a": 2, "b": 3})
            assert result.ok and result.text == "5", result
            await sup.add_server(mini("c", start=Start.EAGER))  # eager: it starts at once
            await sup.router.cell.wait_until(steady("c"))
        assert "b_add" not in before.catalog.tools  # a turn keeps its epoch
        unknown = await before.call("b_add", {"a": 2, "b": 3})
        assert unknown.error is not None and unknown.error.code == "unknown_tool"
        assert await pid_of(sup, "a") == a_pid  # the others untouched
        assert sup.servers()["a"].state is State.STEADY and sup.servers()["a"].generation == 1


async def test_an_added_server_is_known_from_the_store_before_it_starts(tmp_path: Path) -> None:
    async with Supervisor.open(config_of(mini("b")), state_dir=tmp_path) as sup, sup.session() as session:
        with trio.fail_after(BOUND_S):
            await session.begin_turn()  # b lists its tools; the store keeps them
    async with Supervisor.open(config_of(), state_dir=tmp_path) as sup:
        with trio.fail_after(BOUND_S):
            await sup.add_server(mini("b"))
        view = sup.servers()["b"]
        assert (view.state, view.stale) == (State.IDLE, True)  # not started: the cache was enough
        assert "b_echo" in sup.router.cell.current.tools


async def test_add_and_remove_refuse_what_they_cannot_do(tmp_path: Path) -> None:
    config = config_of(mini("a"), mini("p", scope=Scope.SESSION))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        with pytest.raises(ValueError, match="a server named 'a' is supervised already"):
            await sup.add_server(mini("a"))
        with pytest.raises(ValueError, match="a server named 'p' is supervised already"):
            await sup.add_server(mini("p"))
        with pytest.raises(ValueError, match="'q' is session-scoped: each session runs its own"):
            await sup.add_server(mini("q", scope=Scope.SESSION))
        with pytest.raises(KeyError, match="no server named 'zzz'; known: a"):
            await sup.remove_server("zzz")
        assert list(sup.servers()) == ["a"]


async def test_a_removed_server_is_torn_down_and_leaves_the_catalog(tmp_path: Path) -> None:
    config = config_of(mini("a", start=Start.EAGER), mini("b", start=Start.EAGER))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        with trio.fail_after(BOUND_S):
            await sup.router.cell.wait_until(steady("a", "b"))
        turn = await session.begin_turn()
        a_pid, b_pid = await pid_of(sup, "a"), await pid_of(sup, "b")
        answered: list[tuple[float, Any]] = []

        async def sleeper() -> None:
            envelope = await turn.call("b_sleep", {"seconds": 30})
            answered.append((trio.current_time(), envelope))

        with trio.fail_after(BOUND_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sleeper)
                while (status := await sup.connection_status("b")) is None or status.in_flight < 1:  # noqa: ASYNC110
                    await trio.sleep(0.01)
                began = trio.current_time()
                await sup.remove_server("b")
        ((at, envelope),) = answered
        assert at - began < AT_ONCE_S  # not after its 30 s
        assert envelope.error is not None and envelope.error.code == "unavailable"
        assert not alive(b_pid)
        assert "b" not in sup.servers()
        assert not [tool for tool in sup.router.cell.current.tools if tool.startswith("b_")]
        late = await turn.call("b_echo", {"text": "x"})  # a turn begun before: unavailable
        assert late.error is not None and late.error.code == "unavailable"
        after = await session.begin_turn()
        assert {entry.server for entry in after.tools} == {"a"}
        assert await pid_of(sup, "a") == a_pid and sup.servers()["a"].state is State.STEADY
        assert (await after.call("a_echo", {"text": "still here"})).ok
        with pytest.raises(KeyError, match="no server named 'b'; known: a"):
            await sup.command("b", Control.RESTART)
        with trio.fail_after(BOUND_S):
            await sup.add_server(mini("b"))  # the name is free again
            again = await session.begin_turn()
        assert (await again.call("b_echo", {"text": "back"})).ok
