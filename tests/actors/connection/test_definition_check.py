"""A call is sent only on the definition it was decided on (``CallTool.definition``),
checked by the connection actor against what it last listed; on MockClock (autojump)
with a scripted server."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from actors.connection.messages import CallOutcome, CallSucceeded, CallTool, Redefined, ServerListed
from actors.connection.states import State
from actors.protocol.messages import Tool
from actors.spec import Start
from actors.tool_definitions import fingerprint
from tests.actors.connection.test_connection_actor import Harness, running
from tests.support.fakes import FakeServer

OBJECT = {"type": "object"}
ECHO = fingerprint("Echo text back", OBJECT)  # FakeServer's echo as it starts


async def call(h: Harness, definition: str, tool: str = "echo", method: str = "tools/call") -> CallOutcome:
    reply, answers = trio.open_memory_channel[CallOutcome](1)
    await h.mailbox.send(CallTool(tool, {"text": "hi"}, reply, method=method, definition=definition))
    return await answers.receive()


def redescribe(server: FakeServer, description: str) -> dict[str, Any]:
    server.tools[0] = {"name": "echo", "description": description, "inputSchema": OBJECT}
    return server.tools[0]


async def test_a_call_on_the_listed_definition_is_sent(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    async with running(server) as h:
        assert isinstance(await call(h, ECHO), CallSucceeded)
        assert isinstance(await call(h, ECHO), CallSucceeded)  # the hash is kept
        assert len(server.calls()) == 2


async def test_a_call_on_another_definition_is_answered_with_the_listed_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    redescribe(server, "Echo text back and mail it to everyone")
    async with running(server) as h:
        outcome = await call(h, ECHO)
        assert outcome == Redefined(Tool("echo", "Echo text back and mail it to everyone", OBJECT))
        assert server.calls() == []  # nothing reached the server
        new = fingerprint("Echo text back and mail it to everyone", OBJECT)
        assert isinstance(await call(h, new), CallSucceeded)


async def test_unchecked_requests_and_unlisted_tools_go_out_as_before(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    async with running(server) as h:
        assert isinstance(await call(h, ""), CallSucceeded)  # no definition: not checked
        # a tool the server does not list: nothing to check against, the server answers it
        assert isinstance(await call(h, "some definition", tool="gone"), CallSucceeded)
        assert [r.params["name"] for r in server.calls()] == ["echo", "gone"]


async def test_a_lazy_server_started_by_the_call_checks_it_on_its_first_listing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The caller knew only an older definition (a cached list): the call starts the
    server, waits for its listing, and is answered ``Redefined`` instead of sent."""
    server = FakeServer()
    redescribe(server, "Echo text back, now louder")
    async with running(server, start=Start.LAZY) as h:
        assert h.actor.state is State.IDLE
        outcome = await call(h, ECHO)
        assert isinstance(outcome, Redefined) and outcome.tool.description == "Echo text back, now louder"
        assert h.actor.state is State.STEADY and server.calls() == []


async def test_a_relist_moves_what_calls_are_checked_against(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer()
    async with running(server) as h:
        assert isinstance(await call(h, ECHO), CallSucceeded)
        redescribe(server, "Echo, changed")
        assert isinstance(await call(h, ECHO), CallSucceeded)  # not listed yet: the old list holds
        await server.current.notify("notifications/tools/list_changed")
        await h.wait_for(lambda m: isinstance(m, ServerListed) and m.generation == 2)
        assert isinstance(await call(h, ECHO), Redefined)
        assert isinstance(await call(h, fingerprint("Echo, changed", OBJECT)), CallSucceeded)
        assert len(server.calls()) == 3
