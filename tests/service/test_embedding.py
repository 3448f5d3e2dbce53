"""The embedding API end to end, against real subprocess servers (real clock)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.connection.states import State
from actors.spec import ServerSpec, Start
from supervisor import Supervisor, load_config
from supervisor.settings.model import Config
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")


def mini_spec(name: str, *flags: str, python: str, **options: Any) -> ServerSpec:
    options.setdefault("shutdown_grace_s", 0.5)
    options.setdefault("trusted", True)  # these tests are about connections, not trust
    return ServerSpec(name=name, command=(python, MINI, *flags), **options)


def config_of(*specs: ServerSpec) -> Config:
    return Config(servers=tuple(specs))


async def wait_state(sup: Supervisor, name: str, states: Sequence[State]) -> None:
    with trio.fail_after(10):
        await sup.router.cell.wait_until(lambda c: c.servers[name].state in states)


async def test_turn_lists_namespaced_tools_and_calls_one(tmp_path: Path, python: str) -> None:
    config = config_of(mini_spec("mini", python=python))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        ids = [t.id for t in turn.tools]
        assert "mini_echo" in ids and "mini_add" in ids
        assert turn.is_available("mini_echo")
        result = await turn.call("mini_add", {"a": 2, "b": 3})
        assert result.ok, result
        assert result.text == "5"
        data = result.as_dict()
        assert set(data) == {"ok", "tool", "text", "content", "structured", "truncated", "duration_ms"}
        assert data["tool"] == "mini_add" and data["truncated"] is False


async def test_unknown_tool_and_tool_error_and_non_text(tmp_path: Path, python: str) -> None:
    config = config_of(mini_spec("mini", python=python))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        missing = await turn.call("mini_nope", {})
        assert missing.as_dict() == {
            "ok": False,
            "tool": "mini_nope",
            "error": {"code": "unknown_tool", "message": "unknown tool mini_nope"},
        }
        failed = await turn.call("mini_fail", {})
        assert not failed.ok and failed.error is not None and failed.error.code == "tool_error"
        image = await turn.call("mini_image", {})
        assert image.ok and "[non-text content: image (image/png)]" in image.text


async def test_large_output_is_truncated(tmp_path: Path, python: str) -> None:
    config = config_of(mini_spec("mini", python=python, max_output_bytes=1000))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        result = await turn.call("mini_big", {"bytes": 5000})
        assert result.ok and result.truncated
        assert result.text.endswith("... [truncated]")
        assert len(result.text.encode()) <= 1000


async def test_lazy_server_is_idle_until_a_turn_needs_it(tmp_path: Path, python: str) -> None:
    config = config_of(mini_spec("mini", python=python))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        await trio.sleep(0.2)
        assert sup.servers()["mini"].state is State.IDLE
        async with sup.session() as session:
            turn = await session.begin_turn()
            assert turn.catalog.servers["mini"].state is State.STEADY


async def test_eager_server_starts_with_the_supervisor(tmp_path: Path, python: str) -> None:
    config = config_of(mini_spec("mini", python=python, start=Start.EAGER))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        await wait_state(sup, "mini", [State.STEADY])


async def test_list_changed_reaches_the_next_turn_not_the_current_one(tmp_path: Path, python: str) -> None:
    config = config_of(mini_spec("mini", python=python))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        first = await session.begin_turn()
        result = await first.call("mini_add_tool", {"name": "fresh"})
        assert result.ok, result
        with trio.fail_after(5):
            await sup.router.cell.wait_until(lambda c: "mini_fresh" in c.tools)
        assert "mini_fresh" not in first.catalog.tools
        assert (await first.call("mini_fresh", {})).error.code == "unknown_tool"  # type: ignore[union-attr]
        second = await session.begin_turn()
        assert "mini_fresh" in second.catalog.tools
        assert second.epoch > first.epoch


async def test_session_scope_server_is_private_and_ends_with_the_session(tmp_path: Path, python: str) -> None:
    from actors.spec import Scope

    config = config_of(mini_spec("priv", python=python, scope=Scope.SESSION))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as one, sup.session() as two:
        turn_one = await one.begin_turn()
        turn_two = await two.begin_turn()
        assert "priv_echo" in turn_one.catalog.tools and "priv_echo" in turn_two.catalog.tools
        assert "priv" not in sup.servers()
        # crash one session's private server: it is not restarted in that session
        crashed = await turn_one.call("priv_crash", {})
        assert not crashed.ok
        with trio.fail_after(5):
            await sup.router.cell.wait_until(
                lambda c: (
                    c.overlays.get(one.id, {}).get("priv") is not None
                    and c.overlays[one.id]["priv"].state is State.STOPPED
                )
            )
        later = await (await one.begin_turn()).call("priv_echo", {"text": "x"})
        assert later.error is not None and later.error.code == "unavailable"
        assert later.error.message.startswith("mcp server priv is unavailable in this turn (stopped ")
        # the other session's private server is untouched
        assert (await turn_two.call("priv_echo", {"text": "y"})).ok


async def test_load_config_and_missing_command_shows_in_state(tmp_path: Path, python: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"servers": {"ghost": {"command": "no-such-command-xyz", "start": "eager"}}}))
    config = load_config(path)
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        await wait_state(sup, "ghost", [State.BACKOFF])
        view = sup.servers()["ghost"]
        assert view.last_error is not None and "not found on PATH" in view.last_error
        async with sup.session() as session:
            turn = await session.begin_turn()
            result = await turn.call("ghost_anything", {})
            assert result.error is not None and result.error.code == "unknown_tool"


@pytest.fixture
def python() -> str:
    import sys

    return sys.executable


async def test_relist_while_a_call_is_in_flight_keeps_each_turn_on_its_snapshot(
    tmp_path: Path, python: str
) -> None:
    config = config_of(mini_spec("mini", python=python))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        first = await session.begin_turn()
        results = []

        async def slow_call() -> None:
            results.append(await first.call("mini_sleep", {"seconds": 0.5}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow_call)
            await trio.sleep(0.05)
            assert (await first.call("mini_add_tool", {"name": "late"})).ok
            with trio.fail_after(5):
                await sup.router.cell.wait_until(lambda c: "mini_late" in c.tools)
            assert not results  # the slow call is still in flight while the server relists
            second = await session.begin_turn()
        assert results[0].ok and results[0].text == "slept"
        assert "mini_late" not in first.catalog.tools and "mini_late" in second.catalog.tools
        assert first.catalog.servers["mini"].generation < second.catalog.servers["mini"].generation


async def test_status_events_and_cancel_by_request_id(tmp_path: Path, python: str) -> None:
    config = config_of(mini_spec("mini", "--stderr-lines", "3", python=python))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        with sup.events.subscribe() as sub:
            async with sup.session() as session:
                turn = await session.begin_turn()
                status = await sup.connection_status("mini")
                assert status is not None and status.stderr_tail[-1] == "stderr line 2"
                view = sup.servers()["mini"]
                assert [t.state for t in view.transitions][-1] is State.STEADY
                result: list[Any] = []

                async def slow() -> None:
                    result.append(await turn.call("mini_sleep", {"seconds": 30}, request_id="r1"))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(slow)
                    await trio.sleep(0.2)
                    assert not sup.requests.cancel("r1", "another-tenant")
                    assert sup.requests.cancel("r1", "default")
                assert result[0].error.code == "cancelled"
                assert not sup.requests.cancel("r1", None)  # finished: gone
            events = []
            while True:
                try:
                    events.append(sub.events.receive_nowait())
                except trio.WouldBlock:
                    break
        kinds = {e["type"] for e in events}
        assert {"state", "epoch", "call"} <= kinds
        assert [e["outcome"] for e in events if e["type"] == "call"] == ["cancelled"]
