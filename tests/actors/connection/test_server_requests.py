"""Server requests reach the right session (``actors/connection/server_requests.py``):
tied to a call, the calling session's handler, then the supervisor-level one, then a
JSON-RPC error; untied (or ambiguous on stdio), the supervisor-level one. And what each
session declares: a ``scope: session`` connection its session's capabilities, each
per-request-era call its calling session's. The connection actor over a scripted
server (``tests/support/fakes.py``: stdio-like, nothing on the wire ties a request to a call),
on Trio's MockClock (autojump)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio
import trio.testing

from actors.connection.calls import InFlightTable
from actors.connection.client_side import ClientSide, ServerRequestHandler
from actors.connection.messages import CallOutcome, CallSucceeded, CallTool, ConnectionMessage
from actors.connection.server_requests import tied_client
from actors.connection.states import State
from actors.protocol.messages import (
    META_CLIENT_CAPABILITIES,
    UNTIED,
    ErrorResponse,
    Message,
    Notification,
    Request,
    Response,
)
from actors.protocol.session import ServerRequest
from actors.spec import ServerSpec, Start
from actors.transports.http_link import Inbox
from actors.transports.streamable_http import StreamableHttpTransport
from supervisor.runtime.connections import ConnectionFactory
from supervisor.sessions.handlers import SessionHandlers
from tests.actors.connection.test_connection_actor import Harness, running
from tests.actors.connection.test_connection_rounds import confirm_once, text
from tests.support.fakes import MODERN_DISCOVER, FakeServer, FakeSession

SAMPLE = "sampling/createMessage"


def recording(name: str, seen: list[tuple[str, str]], answer: bool = True) -> ServerRequestHandler:
    """A handler that notes ``(name, method)`` and answers (or, without ``answer``,
    says it does not handle the method)."""

    async def handler(server: str, method: str, params: Any) -> dict[str, Any] | None:
        seen.append((name, method))
        return {"by": name} if answer else None

    return handler


def side(session: str, seen: list[tuple[str, str]], answer: bool = True) -> ClientSide:
    return ClientSide(session, recording(session, seen, answer), {"sampling": {}})


def hanging(release: trio.Event) -> Any:
    async def handler(session: FakeSession, request: Request) -> dict[str, Any] | None:
        await release.wait()
        return {"content": [{"type": "text", "text": "done"}]}

    return handler


@asynccontextmanager
async def calls_hang(
    seen: list[tuple[str, str]], *, supervisor_level: bool = True
) -> AsyncIterator[tuple[Harness, FakeServer, trio.Event]]:
    """A steady connection whose calls hang until the event is set; with
    ``supervisor_level``, a recording supervisor-level handler."""
    server, release = FakeServer(), trio.Event()
    server.call_handler = hanging(release)
    options = {"server_requests": recording("supervisor", seen)} if supervisor_level else {}
    async with running(server, **options) as h:
        await h.wait_state(State.STEADY)
        yield h, server, release
        release.set()


async def start_call(
    h: Harness, client: ClientSide | None, tool: str = "echo"
) -> trio.MemoryReceiveChannel[CallOutcome]:
    reply, answers = trio.open_memory_channel[CallOutcome](1)
    await h.mailbox.send(CallTool(tool, {}, reply, client=client))
    return answers


async def ask(server: FakeServer, rid: int, method: str = SAMPLE) -> Message:
    """Send the client a request; return its answer."""
    await server.current.send(Request(rid, method, {}))
    with trio.fail_after(1):  # answered well before any timeout
        while True:
            for m in server.received:
                if isinstance(m, Response | ErrorResponse) and m.id == rid:
                    return m
            await trio.sleep(0.01)


async def test_a_request_while_one_sessions_calls_are_in_flight_goes_to_that_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[str, str]] = []
    async with calls_hang(seen) as (h, server, release):
        a = side("A", seen)
        first, second = await start_call(h, a), await start_call(h, a)  # two calls, one session
        await trio.sleep(0.1)
        assert await ask(server, 90) == Response(90, {"by": "A"})
        release.set()
        await first.receive(), await second.receive()
        assert await ask(server, 91) == Response(91, {"by": "supervisor"})  # nothing in flight: untied
        assert seen == [("A", SAMPLE), ("supervisor", SAMPLE)]


async def test_calls_of_two_sessions_in_flight_make_a_request_untied(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[str, str]] = []
    async with calls_hang(seen) as (h, server, _release):
        await start_call(h, side("A", seen)), await start_call(h, side("B", seen))
        await trio.sleep(0.1)
        assert await ask(server, 90) == Response(90, {"by": "supervisor"})
        assert seen == [("supervisor", SAMPLE)]  # never a guess between A and B


async def test_a_session_that_does_not_handle_the_method_falls_back_then_errors(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[str, str]] = []
    async with calls_hang(seen) as (h, server, _release):
        await start_call(h, side("A", seen, answer=False))
        await trio.sleep(0.1)
        assert await ask(server, 90) == Response(90, {"by": "supervisor"})
        assert seen == [("A", SAMPLE), ("supervisor", SAMPLE)]


@pytest.mark.parametrize("in_flight", [False, True])
async def test_without_any_handler_the_server_is_told_none_is_attached(
    autojump_clock: trio.testing.MockClock, in_flight: bool
) -> None:
    seen: list[tuple[str, str]] = []
    async with calls_hang(seen, supervisor_level=False) as (h, server, _release):
        if in_flight:
            await start_call(h, side("A", seen, answer=False))
            await trio.sleep(0.1)
        answer = await ask(server, 90, "roots/list")
        assert isinstance(answer, ErrorResponse)
        assert (answer.error.code, answer.error.message) == (-32601, "no handler is attached for roots/list")
        assert seen == ([("A", "roots/list")] if in_flight else [])


def test_a_request_tagged_with_its_call_goes_to_that_calls_session_only() -> None:
    inflight = InFlightTable(30, 300)
    a, b = ClientSide("A"), ClientSide("B")
    reply: Any = object()
    inflight.add(1, CallTool("t", {}, reply, client=a), 0.0)
    inflight.add(2, CallTool("t", {}, cast(Any, object()), client=b), 0.0)
    inflight.add(3, CallTool("t", {}, cast(Any, object())), 0.0)
    assert tied_client(ServerRequest(9, SAMPLE, {}, related=2), inflight) is b
    assert tied_client(ServerRequest(9, SAMPLE, {}, related=1), inflight) is a
    assert tied_client(ServerRequest(9, SAMPLE, {}, related=3), inflight) is None  # a call of no session
    assert tied_client(ServerRequest(9, SAMPLE, {}, related=77), inflight) is None  # no call (tools/list)
    assert tied_client(ServerRequest(9, SAMPLE, {}, related=UNTIED), inflight) is None  # the GET stream
    assert tied_client(ServerRequest(9, SAMPLE, {}), inflight) is None  # untagged, three owners: ambiguous


async def test_streamable_http_tags_requests_and_notifications_with_the_stream_they_came_on() -> None:
    inbox = Inbox()
    transport = StreamableHttpTransport(cast(Any, SimpleNamespace(inbox=inbox)), may_fall_back=False)
    call = Request(5, "tools/call", {"name": "t", "arguments": {}})
    sampling, note = Request(1, SAMPLE, {}), Notification("notifications/message", {})
    assert await transport._deliver([sampling, note, Response(5, {"content": []})], call)
    on_post = await inbox.get()
    assert [getattr(m, "related", "-") for m in on_post] == [5, 5, "-"]  # its log message too
    await transport._deliver([Request(2, "roots/list", {})], None)  # the GET stream
    (on_get,) = await inbox.get()
    assert isinstance(on_get, Request) and on_get.related is UNTIED


async def test_each_per_request_call_declares_its_sessions_capabilities_exactly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer()
    server.discover = MODERN_DISCOVER
    async with running(server, server_requests=recording("supervisor", [])) as h:  # declares elicitation
        await h.wait_state(State.STEADY)
        a = ClientSide("A", None, {"sampling": {}})
        for client in (a, ClientSide("B", None, {}), None):
            assert isinstance(await (await start_call(h, client)).receive(), CallSucceeded)
        declared = [m.params["_meta"][META_CLIENT_CAPABILITIES] for m in server.calls()]  # type: ignore[index,call-overload]
        assert declared == [{"sampling": {}}, {}, {"elicitation": {}}]
        listed = next(m for m in server.received if isinstance(m, Request) and m.method == "tools/list")
        assert listed.params["_meta"][META_CLIENT_CAPABILITIES] == {"elicitation": {}}  # type: ignore[index,call-overload]


async def test_input_required_asks_the_calling_sessions_handler_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[str, str]] = []
    server = FakeServer()
    server.discover = MODERN_DISCOVER
    server.call_handler = confirm_once
    async with running(server, server_requests=recording("supervisor", seen)) as h:
        await h.wait_state(State.STEADY)
        assert "{'by': 'A'}" in text(await (await start_call(h, side("A", seen), "deploy")).receive())
        assert "{'by': 'supervisor'}" in text(
            await (await start_call(h, side("B", seen, False), "x")).receive()
        )
        assert "{'by': 'supervisor'}" in text(await (await start_call(h, None, "y")).receive())
        elicit = "elicitation/create"
        # B does not handle it: the supervisor-level handler answers B's call, and the call of no session
        assert seen == [("A", elicit), ("B", elicit), ("supervisor", elicit), ("supervisor", elicit)]


@asynccontextmanager
async def private_actor(
    server: FakeServer, handlers: SessionHandlers, seen: list[tuple[str, str]]
) -> AsyncIterator[None]:
    """A ``scope: session`` connection of session ``s1``, built as a session builds it."""
    router, routed = trio.open_memory_channel[Any](1000)
    factory = ConnectionFactory(server.connector, router, {"elicitation": {}}, recording("supervisor", seen))
    send, receive = trio.open_memory_channel[ConnectionMessage](16)
    client = handlers.client_side("s1", factory.client_capabilities)
    actor = factory.actor(
        ServerSpec("own", command=("fake",), start=Start.EAGER),
        receive,
        owner="s1",
        restart=False,
        client=client,
    )

    async def drain() -> None:
        async for _published in routed:
            pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        await nursery.start(actor.run)
        await trio.sleep(1)  # connected and listed well within this (virtual) second
        assert "tools/list" in server.methods()
        yield
        nursery.cancel_scope.cancel()
    del send


async def test_a_session_scoped_connection_declares_and_answers_for_its_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[str, str]] = []

    async def sampling(server: str, params: Any) -> dict[str, Any]:
        seen.append(("s1", SAMPLE))
        return {"by": "s1"}

    server = FakeServer()
    handlers = SessionHandlers(sampling=sampling, roots=["file:///work"])
    async with private_actor(server, handlers, seen):
        init = next(m for m in server.received if isinstance(m, Request) and m.method == "initialize")
        assert init.params["capabilities"] == {  # type: ignore[index,call-overload]
            "elicitation": {},  # the supervisor-level default, which answers what the session does not
            "sampling": {},
            "roots": {"listChanged": False},
        }
        assert await ask(server, 90) == Response(90, {"by": "s1"})  # untied: its session first
        assert await ask(server, 91, "roots/list") == Response(91, {"roots": [{"uri": "file:///work"}]})
        assert await ask(server, 92, "elicitation/create") == Response(92, {"by": "supervisor"})
        assert seen == [("s1", SAMPLE), ("supervisor", "elicitation/create")]


async def test_session_handlers_declare_and_answer_what_they_handle() -> None:
    async def sampling(server: str, params: Any) -> dict[str, Any]:
        return {"sampled": server}

    default = {"elicitation": {}, "experimental": {"x": {}}}
    bare = SessionHandlers().client_side("s", default)  # no handlers: the supervisor-level default
    assert (bare.session, bare.handler, bare.capabilities) == ("s", None, default)
    handlers = SessionHandlers(
        sampling=sampling, elicitation=sampling, roots=["file:///a", {"uri": "file:///b", "name": "b"}]
    )
    assert handlers.capabilities(default) == {
        "elicitation": {"form": {}, "url": {}},
        "experimental": {"x": {}},
        "sampling": {},
        "roots": {"listChanged": False},
    }
    assert await handlers.handle("srv", SAMPLE, {}) == {"sampled": "srv"}
    assert await handlers.handle("srv", "roots/list", {}) == {
        "roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "b"}]
    }
    assert await handlers.handle("srv", "something/else", {}) is None


@pytest.mark.parametrize(
    ("roots", "problem"),
    [
        (["/home/me"], "session roots=: a root's uri must be a file:// URI (MCP roots); got '/home/me'"),
        ([42], "session roots=: a root is a file:// URI string or a mapping with a 'uri'; got 42"),
        ("file:///a", "session roots=: expected a list of roots; got 'file:///a'"),
    ],
)
def test_bad_roots_are_refused_naming_the_fix(roots: Any, problem: str) -> None:
    with pytest.raises(ValueError) as raised:
        SessionHandlers(roots=roots)
    assert str(raised.value) == problem
