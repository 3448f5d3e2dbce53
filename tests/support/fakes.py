"""A scripted MCP server behind an in-memory transport, for actor tests on MockClock.

Each connect runs one ``FakeServer`` session in a nursery owned by the fake
connector's context manager; the test scripts its behaviour through attributes
(tools, how calls are answered, whether to die) and reads what it received.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

import orjson
import trio
import trio.testing

from actors.protocol.listen import ACKNOWLEDGED, LISTEN, SUBSCRIPTION_ID
from actors.protocol.messages import (
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorObject,
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
)
from actors.protocol.ndjson import LineDecoder, encode_lines
from actors.protocol.ndjson import encode_line as encode
from actors.spec import ServerSpec
from actors.transport_errors import SpawnError, TransportClosed
from actors.transports.base import Transport

CallHandler = Callable[["FakeSession", Request], Awaitable[dict[str, Any] | None]]
Answerer = Callable[[Request], "dict[str, Any] | ErrorObject | None"]
"""Answers one request of another method: a result, an error, or None (no answer)."""


async def echo_handler(session: FakeSession, request: Request) -> dict[str, Any] | None:
    """Answer every call with the text of its arguments."""
    assert isinstance(request.params, dict)
    args = request.params.get("arguments", {})
    return {"content": [{"type": "text", "text": orjson.dumps(args).decode()}]}


class MemoryTransport(Transport):
    """Transport over a trio memory stream, framed as stdio frames (one line a message)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self._decoder = LineDecoder()

    async def send(self, messages: Sequence[Message]) -> None:
        data = encode_lines(messages)
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise TransportClosed(f"fake server gone: {exc!r}") from None

    async def receive(self) -> list[Message]:
        self._decoder.raise_held()
        while True:
            try:
                data = await self._stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return []
            if not data:
                return []
            if messages := self._decoder.take(data):
                return messages

    def stderr_tail(self) -> Sequence[str]:
        return []

    def describe(self) -> str:
        return "memory"


class FakeSession:
    """The server end of one connection."""

    def __init__(self, server: FakeServer, stream: trio.abc.Stream) -> None:
        self.server = server
        self.stream = stream
        self.decoder = LineDecoder()
        self.closed = trio.Event()
        self._send_lock = trio.Lock()  # answers finished together go one after the other
        # Answered server/discover with the new era: the connection is locked to it and
        # initialize is refused with -32022, as the SDK's dual-era loop does.
        self.modern = False
        self.listens: list[RequestId] = []  # subscriptions/listen acknowledged, still open
        self.filters: dict[RequestId, dict[str, Any]] = {}  # what each listen request asked for

    async def send(self, message: Message) -> None:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async with self._send_lock:
                await self.stream.send_all(encode(message))

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self.send(Notification(method, params))

    async def notify_listeners(self, method: str) -> None:
        """Send ``method`` on every open listen request, stamped with its id."""
        for listen in self.listens:
            await self.notify(method, {"_meta": {SUBSCRIPTION_ID: listen}})

    async def update(self, uri: str) -> None:
        """``notifications/resources/updated`` on every open listen request that asked
        for ``uri``, stamped with its id."""
        for listen in self.listens:
            if uri in self.filters[listen].get("resourceSubscriptions", ()):
                params = {"uri": uri, "_meta": {SUBSCRIPTION_ID: listen}}
                await self.notify("notifications/resources/updated", params)

    async def end_listens(self, *, cancel: bool = False) -> None:
        """End every open listen request: answered with its result (the graceful end),
        or with ``cancel``, by ``notifications/cancelled`` naming it."""
        listens, self.listens = self.listens, []
        for listen in listens:
            if cancel:
                await self.notify("notifications/cancelled", {"requestId": listen})
            else:
                await self.send(Response(listen, {"_meta": {SUBSCRIPTION_ID: listen}}))

    async def close(self) -> None:
        """Simulate the server process dying."""
        self.closed.set()
        await self.stream.aclose()

    async def run(self, nursery: trio.Nursery) -> None:
        server = self.server
        await trio.sleep(server.start_delay)
        while True:
            try:
                data = await self.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                return
            for message in self.decoder.feed(data):
                server.received.append(message)
                if isinstance(message, Notification) and message.method == "notifications/cancelled":
                    cancelled = (message.params or {}).get("requestId")  # type: ignore[union-attr]
                    if cancelled in self.listens:  # a listen request ends when it is cancelled
                        self.listens.remove(cancelled)
                elif isinstance(message, Request):
                    if message.method == "server/discover" and isinstance(server.discover, dict):
                        self.modern = True  # in the order read, not the order answered
                    nursery.start_soon(self._answer, message)

    async def _answer(self, request: Request) -> None:
        server = self.server
        if request.method == "server/discover":
            await self._discover(request)
        elif request.method == "initialize" and self.modern:
            refusal = ErrorObject(
                UNSUPPORTED_PROTOCOL_VERSION,
                "connection is serving the 2026-07-28 protocol; the initialize handshake is not accepted",
                {"supported": ["2026-07-28"]},
            )
            await self.send(ErrorResponse(request.id, refusal))
        elif request.method == "initialize":
            if server.init_delay:
                await trio.sleep(server.init_delay)
            if server.die_during_init:
                await self.close()
                return
            version = (request.params or {}).get("protocolVersion")  # type: ignore[union-attr]
            await self.send(
                Response(
                    request.id,
                    {
                        "protocolVersion": server.protocol_version or version,
                        "capabilities": server.capabilities,
                        "serverInfo": {"name": "fake", "version": "1"},
                    },
                )
            )
        elif request.method == "tools/list":
            server.list_calls += 1
            if server.list_delay:
                await trio.sleep(server.list_delay)
            await self.send(Response(request.id, {"tools": list(server.tools), **server.list_extra}))
        elif request.method == "ping":
            if server.answer_ping:
                await self.send(Response(request.id, {}))
        elif request.method == "tools/call":
            result = await server.call_handler(self, request)
            if result is not None:
                await self.send(Response(request.id, result))
        elif request.method == LISTEN:
            await self._listen(request)
        elif request.method in server.answers:
            answered = server.answers[request.method](request)
            if isinstance(answered, ErrorObject):
                await self.send(ErrorResponse(request.id, answered))
            elif answered is not None:
                await self.send(Response(request.id, answered))

    async def _listen(self, request: Request) -> None:
        """``subscriptions/listen`` as ``server.listen`` says."""
        how = self.server.listen
        if how == "refuse":
            await self.send(ErrorResponse(request.id, ErrorObject(METHOD_NOT_FOUND, "Method not found")))
        elif how == "fail":
            await self.send(ErrorResponse(request.id, ErrorObject(-32603, "Subscription limit reached")))
        elif how == "hold":
            self.listens.append(request.id)
            params = request.params if isinstance(request.params, dict) else {}
            asked = self.filters[request.id] = dict(params.get("notifications") or {})
            honored = self.server.honor_uris
            agreed = {k: v for k, v in asked.items() if k != "resourceSubscriptions" or honored}
            ack = {"notifications": agreed, "_meta": {SUBSCRIPTION_ID: request.id}}
            await self.notify(ACKNOWLEDGED, ack)

    async def _discover(self, request: Request) -> None:
        """A handshake-era server by default (method not found), else as scripted."""
        answer = self.server.discover
        if answer == "silent":
            return
        await trio.sleep(self.server.discover_delay)
        if answer == "close":
            await self.close()
        elif isinstance(answer, dict):
            await self.send(Response(request.id, answer))
        else:
            await self.send(ErrorResponse(request.id, ErrorObject(METHOD_NOT_FOUND, "Method not found")))


MODERN_DISCOVER: dict[str, Any] = {
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {"listChanged": True}},
    "resultType": "complete",
    "ttlMs": 0,
    "cacheScope": "public",
}
"""A ``server/discover`` answer of a server of the per-request era."""


class FakeServer:
    """Scriptable server; ``connector`` is what the actor gets."""

    def __init__(self, tools: Sequence[dict[str, Any]] | None = None) -> None:
        self.tools: list[dict[str, Any]] = list(
            tools
            if tools is not None
            else [{"name": "echo", "description": "Echo text back", "inputSchema": {"type": "object"}}]
        )
        self.call_handler: CallHandler = echo_handler
        self.connect_times: list[float] = []
        self.received: list[Message] = []
        self.sessions: list[FakeSession] = []
        self.fail_connect = False
        self.die_during_init = False
        self.init_delay = 0.0
        self.list_delay = 0.0
        self.answer_ping = True
        self.protocol_version: str | None = None
        # server/discover: None (method not found), a result, "silent" or "close".
        self.discover: dict[str, Any] | str | None = None
        self.start_delay = 0.0  # a slow start (imports): nothing is read before it passed
        self.discover_delay = 0.0  # server/discover alone is answered this late
        self.list_calls = 0
        self.list_extra: dict[str, Any] = {}  # more keys of every tools/list result (ttlMs)
        self.connected = trio.Event()
        self.capabilities: dict[str, Any] = {"tools": {"listChanged": True}}  # initialize's
        self.answers: dict[str, Answerer] = {}  # other methods (resources/list …), by method
        # subscriptions/listen: "hold" (acknowledge, keep open), "refuse" (-32601),
        # "fail" (-32603 before any acknowledgement) or "silent".
        self.listen = "hold"
        self.honor_uris = True  # a listen's acknowledgement agrees to its resourceSubscriptions

    @property
    def current(self) -> FakeSession:
        return self.sessions[-1]

    def notifications(self, method: str) -> list[Notification]:
        return [m for m in self.received if isinstance(m, Notification) and m.method == method]

    def methods(self) -> list[str]:
        """The methods of every request received, in order."""
        return [m.method for m in self.received if isinstance(m, Request)]

    def calls(self) -> list[Request]:
        return [m for m in self.received if isinstance(m, Request) and m.method == "tools/call"]

    @asynccontextmanager
    async def connector(self, spec: ServerSpec) -> AsyncIterator[MemoryTransport]:
        self.connect_times.append(trio.current_time())
        if self.fail_connect:
            raise SpawnError(f"mcp server {spec.name}: command 'fake' not found on PATH")
        client_end, server_end = trio.testing.memory_stream_pair()
        session = FakeSession(self, server_end)
        self.sessions.append(session)
        self.connected.set()
        self.connected = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.run, nursery)
            try:
                yield MemoryTransport(client_end)
            finally:
                nursery.cancel_scope.cancel()
                await client_end.aclose()
