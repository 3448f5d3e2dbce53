"""What a connection asks its server for in log messages, and where they go
(``actors/connection/log_levels.py``): in the handshake era ``logging/setLevel`` with
the most verbose level of our log and its clients, sent again when that changes
(``WantLogs``, a reload); in the per-request era each call's ``_meta`` level, and the
messages of the one call that asked go to its caller alone. A scripted server
(``tests/support/fakes.py``, stdio-like), on Trio's MockClock (autojump)."""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actors.connection.client_side import ClientSide
from actors.connection.messages import CallOutcome, CallSucceeded, CallTool, Retune, WantLogs
from actors.connection.server_log import ServerLogged
from actors.connection.states import State
from actors.log_events import event_name, record_fields
from actors.protocol.messages import META_LOG_LEVEL, Request
from tests.actors.connection.test_connection_actor import Harness, running
from tests.support.fakes import MODERN_DISCOVER, FakeServer, FakeSession


def logging_server(*, modern: bool = False) -> FakeServer:
    server = FakeServer()
    server.capabilities = {"tools": {}, "logging": {}}
    server.answers["logging/setLevel"] = lambda request: {}
    if modern:
        server.discover = {**MODERN_DISCOVER, "capabilities": {"tools": {}, "logging": {}}}
    return server


def levels_asked(server: FakeServer) -> list[str]:
    return [
        m.params["level"]
        for m in server.received
        if isinstance(m, Request) and m.method == "logging/setLevel"
    ]  # type: ignore[call-overload,index]


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


async def test_a_handshake_era_server_is_asked_for_the_most_verbose_level_wanted_now(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = logging_server()
    async with running(server, wanted_logs="error") as h:
        await h.wait_state(State.STEADY)
        await settle()
        assert levels_asked(server) == ["warning"], "our log's level: more verbose than the clients'"
        for wanted in ("debug", "info", "info", "error", None):
            await h.mailbox.send(WantLogs(wanted))
            await settle()
        assert levels_asked(server) == ["warning", "debug", "info", "warning"], "only changes are sent"
        await h.mailbox.send(Retune(attrs.evolve(h.actor.spec, log_level="error")))
        await settle()
        assert levels_asked(server) == ["warning", "debug", "info", "warning", "error"]


async def call(h: Harness, client: ClientSide | None) -> CallOutcome:
    reply, answers = trio.open_memory_channel[CallOutcome](1)
    await h.mailbox.send(CallTool("echo", {}, reply, client=client))
    return await answers.receive()


async def logs_then_answers(session: FakeSession, request: Request) -> dict[str, Any]:
    """Logs at info and at warning while it runs, then answers."""
    for level in ("info", "warning"):
        await session.notify("notifications/message", {"level": level, "data": f"{level} of the call"})
    await trio.sleep(0.1)
    return {"content": [{"type": "text", "text": "done"}]}


async def test_in_the_per_request_era_each_call_asks_for_its_callers_level_and_gets_its_messages(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="actors.server")
    server = logging_server(modern=True)
    server.call_handler = logs_then_answers
    heard: list[ServerLogged] = []
    everyone: list[ServerLogged] = []
    asker = ClientSide("A", log_level="info", logs=heard.append)
    async with running(server, log_sink=everyone.append) as h:
        await h.wait_state(State.STEADY)
        assert isinstance(await call(h, asker), CallSucceeded)
        assert isinstance(await call(h, ClientSide("B")), CallSucceeded)
        await settle()
    asked = [call.params["_meta"].get(META_LOG_LEVEL) for call in server.calls()]  # type: ignore[call-overload,index,union-attr]
    assert asked == ["info", "warning"]  # the caller's, else our log's
    assert levels_asked(server) == [], "the era has no logging/setLevel"
    assert [m.data for m in heard] == ["info of the call", "warning of the call"]
    assert everyone == [], "a call's messages are its caller's alone"
    ours = [record_fields(r)["data"] for r in caplog.records if event_name(r) == "server log"]
    assert ours == ["warning of the call", "warning of the call"]  # our log: its level, from both
