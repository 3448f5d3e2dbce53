"""``supervisor.aio`` from an asyncio host: turns, calls, progress, cancellation and a
server killed mid-call, against real stdio servers (tests/servers/mini_server.py).

Each test is a sync function that runs its host under ``asyncio.run``; the supervisor's
Trio runs as a guest of that loop, on the test's thread."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

import pytest

from actors.connection.states import Availability, State
from actors.protocol.notifications import ProgressReceived
from actors.spec import Start
from supervisor.aio import Envelope, RequestInFlight, Supervisor
from supervisor.settings.model import Config, ToolSearchSettings
from tests.end_to_end.test_chaos import server_pids
from tests.support.aio_host import host, mini, state_of, until


def _count(path: Path, word: str) -> int:
    return path.read_text().count(word) if path.exists() else 0


def test_a_turn_lists_searches_and_calls_as_the_trio_api_does(tmp_path: Path) -> None:
    search_on = ToolSearchSettings(enabled=True)
    config = Config(servers=(mini("mini", start=Start.EAGER),), tool_search=search_on)

    async def main() -> None:
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            assert sup.config is config and sup.state_dir == tmp_path and sup.instance_id
            await state_of(sup, "mini", State.STEADY)
            async with sup.session(tenant="t1", pinned=["mini_echo"]) as session:
                assert session.tenant == "t1" and session.id
                turn = await session.begin_turn()
                assert turn.search_enabled and turn.id.startswith(session.id) and turn.epoch >= 1
                assert [t.id for t in turn.tools] == ["mini_echo", "tool_search"]
                assert [item["id"] for item in turn.listing()] == ["mini_echo", "tool_search"]
                assert turn.availability("mini_echo") is Availability.AVAILABLE
                assert turn.is_available("mini_echo") and turn.availability("mini_nope") is None
                assert not turn.shows("mini_add")
                hidden = await turn.call("mini_add", {"a": 2, "b": 3})
                assert hidden.error is not None and hidden.error.code == "unknown_tool"
                assert "call tool_search to find it" in hidden.error.message
                found = turn.search("add two numbers")
                assert "mini_add" in [match["id"] for match in found["matches"]] and turn.shows("mini_add")
                added = await turn.call("mini_add", {"a": 2, "b": 3})
                assert isinstance(added, Envelope) and added.ok and added.text == "5", added
                bad = await turn.call("mini_add", {"a": "two"})
                assert bad.error is not None and bad.error.code == "invalid_arguments"
                by_search = await turn.call("tool_search", {"query": "echo"})
                assert by_search.ok and "mini_echo" in by_search.text

    host(main)


def test_progress_reaches_the_hosts_callback_on_its_thread_in_order_before_the_result(
    tmp_path: Path,
) -> None:
    config = Config(servers=(mini("mini"),))
    seen: list[tuple[ProgressReceived, int, asyncio.AbstractEventLoop]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()

            def progress(event: ProgressReceived) -> None:
                seen.append((event, threading.get_ident(), asyncio.get_running_loop()))

            result = await turn.call("mini_progress", {"steps": 3, "interval": 0.01}, progress=progress)
            assert result.ok, result
            assert [event.progress for event, _, _ in seen] == [1.0, 2.0, 3.0]  # all of them, first
            assert {(thread, running) for _, thread, running in seen} == {(threading.get_ident(), loop)}
            with pytest.raises(TypeError, match="progress=: expected a callable"):
                await turn.call("mini_echo", {"text": "x"}, progress=[])  # type: ignore[arg-type]

    host(main)


def test_cancelling_the_awaiting_task_cancels_the_call_at_the_server(tmp_path: Path) -> None:
    methods = tmp_path / "methods.log"
    config = Config(servers=(mini("mini", "--methods-log", str(methods)),))

    async def main() -> None:
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            call = asyncio.create_task(turn.call("mini_sleep", {"seconds": 30}))
            await until(lambda: _count(methods, "tools/call") == 1)  # the server has it
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            await until(lambda: _count(methods, "notifications/cancelled") == 1)  # the server was told
            again = await turn.call("mini_echo", {"text": "on"})
            assert again.ok and again.text == "on"  # the session lives on

    host(main)


def test_a_request_id_cancels_by_id_and_a_second_use_while_in_flight_is_refused(tmp_path: Path) -> None:
    config = Config(servers=(mini("mini"),))

    async def main() -> None:
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            turn = await session.begin_turn()
            slow = asyncio.create_task(turn.call("mini_sleep", {"seconds": 30}, request_id="r-1"))
            await asyncio.sleep(0.2)
            with pytest.raises(RequestInFlight, match="'r-1' is already in flight"):
                await turn.call("mini_echo", {"text": "x"}, request_id="r-1")
            assert not await sup.cancel_request("r-1", "another-tenant")
            assert await sup.cancel_request("r-1")
            cancelled = await slow
            assert cancelled.error is not None and cancelled.error.code == "cancelled"
            assert not await sup.cancel_request("r-1")  # it ended

    host(main)


def test_a_server_killed_mid_call_answers_unavailable_at_once_and_serves_after_its_reconnect(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls-victim.log"
    config = Config(servers=(mini("victim", "--calls-log", str(log), start=Start.EAGER),))

    async def main() -> None:
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            await state_of(sup, "victim", State.STEADY)
            turn = await session.begin_turn()
            calls = [asyncio.create_task(turn.call("victim_sleep", {"seconds": 30})) for _ in range(3)]
            await until(lambda: _count(log, "sleep") == 3)
            [pid] = server_pids(str(log))
            loop = asyncio.get_running_loop()
            killed_at = loop.time()
            os.kill(pid, signal.SIGKILL)
            results: list[Envelope] = await asyncio.gather(*calls)
            assert loop.time() - killed_at < 1.0
            assert {(r.error.code, r.error.message) for r in results if r.error is not None} == {
                ("unavailable", "MCP server stopped responding during tools/call sleep")
            }
            await state_of(sup, "victim", State.BACKOFF)
            await state_of(sup, "victim", State.STEADY)  # its first retry, about 1 s later
            later = await (await session.begin_turn()).call("victim_echo", {"text": "back"})
            assert later.ok and later.text == "back"

    host(main)
