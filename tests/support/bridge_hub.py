"""A small bridge hub for the ``websocket`` client transport's tests.

It speaks the envelope of ``actors/protocol/bridge_envelope.py`` over trio-websocket
on loopback, checks the ``Authorization`` header (HTTP 401 otherwise), and gives each
``mcp:session:open`` a backend session of its own through a connector: a real stdio
child (``StdioConnector``: the supervisor's own spawn and process-group teardown) or a
``FakeServer`` in memory for tests on virtual time. JSON-RPC passes through as sent;
nothing is broadcast. ``kill()`` drops every socket without a close frame, as a hub
process that died does; ``serve`` again and it is back on the same port.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, wrap_server_stream

from actors.protocol import bridge_envelope as env
from actors.protocol.jsonrpc import parse_message, to_wire
from actors.protocol.messages import Message
from actors.spec import ServerSpec
from actors.transport_errors import TransportError
from actors.transports.base import Connector

Backends = Mapping[str, tuple[Connector, ServerSpec]]


class MiniHub:
    def __init__(self, servers: Backends, token: str) -> None:
        self.servers = servers
        self.token = token
        self.port = 0
        self.frames: list[env.Frame] = []
        """Every frame a client sent, in order."""
        self.opened: list[str] = []
        """Every server name a session was opened for."""
        self._streams: set[trio.SocketStream] = set()
        self._scope: trio.CancelScope | None = None
        self._ids = itertools.count(1)
        self.ping_on_close = False
        """Answer a session close with a ping at once (trio-websocket#184's race)."""

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/bridge"

    def jsonrpc(self, method: str) -> list[dict[str, Any]]:
        """What clients sent of ``method``."""
        return [
            f.data["jsonrpc"]
            for f in self.frames
            if f.type == env.MESSAGE and f.data["jsonrpc"].get("method") == method
        ]

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(self.port, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        with trio.CancelScope() as self._scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(trio.serve_listeners, self._connection, listeners)
                task_status.started()

    async def kill(self) -> None:
        """Every socket dropped at once (TCP FIN, no WebSocket close), then stop."""
        for stream in list(self._streams):
            await stream.aclose()
        assert self._scope is not None
        self._scope.cancel()

    async def _connection(self, stream: trio.SocketStream) -> None:
        self._streams.add(stream)
        try:
            async with trio.open_nursery() as nursery:
                request = await wrap_server_stream(nursery, stream, max_message_size=env.DEFAULT_MAX_BYTES)
                if dict(request.headers).get(b"authorization") != f"Bearer {self.token}".encode():
                    await request.reject(401, body=b"bad token")
                else:
                    await self._serve_socket(await request.accept(), nursery)
                nursery.cancel_scope.cancel()
        finally:
            self._streams.discard(stream)
            await trio.aclose_forcefully(stream)

    async def _serve_socket(self, ws: WebSocketConnection, nursery: trio.Nursery) -> None:
        sessions: dict[str, tuple[trio.CancelScope, trio.MemorySendChannel[Message]]] = {}
        while True:
            try:
                frame = env.decode(await ws.get_message())
            except ConnectionClosed:
                break
            if isinstance(frame, env.EnvelopeError):
                await ws.send_message(env.encode(env.of_error(frame)))
                continue
            self.frames.append(frame)
            if frame.type == env.OPEN:
                name = frame.data["serverName"]
                if name not in self.servers:
                    refusal = env.open_failed(
                        "not_exported", f"no server {name!r} is exported through the bridge", frame.id
                    )
                    await ws.send_message(env.encode(refusal))
                    continue
                session_id = f"s-{next(self._ids)}"
                inbox, outbox = trio.open_memory_channel[Message](100)
                sessions[session_id] = (trio.CancelScope(), inbox)
                nursery.start_soon(
                    self._session, ws, session_id, name, frame.id, sessions[session_id][0], outbox
                )
            elif frame.type in (env.MESSAGE, env.CLOSE):
                found = sessions.get(frame.data["sessionId"])
                if found is None:
                    unknown = env.error("unknown_session", "no such session", frame.data["sessionId"])
                    await ws.send_message(env.encode(unknown))
                elif frame.type == env.CLOSE:
                    found[0].cancel()
                    if self.ping_on_close:
                        await ws.ping()
                else:
                    await found[1].send(parse_message(frame.data["jsonrpc"]))
        for scope, _ in sessions.values():
            scope.cancel()

    async def _session(
        self,
        ws: WebSocketConnection,
        session_id: str,
        name: str,
        open_id: env.FrameId | None,
        scope: trio.CancelScope,
        outbox: trio.MemoryReceiveChannel[Message],
    ) -> None:
        connector, spec = self.servers[name]
        opened = False
        with scope, suppress(ConnectionClosed):
            try:
                async with connector(spec) as child, trio.open_nursery() as pump:
                    opened = True
                    self.opened.append(name)
                    await ws.send_message(env.encode(env.open_result(session_id, open_id)))
                    pump.start_soon(_to_child, child, outbox)
                    while messages := await child.receive():
                        for message in messages:
                            await ws.send_message(env.encode(env.message(session_id, to_wire(message))))
                    pump.cancel_scope.cancel()
            except TransportError as exc:
                if opened:
                    await ws.send_message(env.encode(env.session_close(session_id, "exited", str(exc))))
                else:
                    await ws.send_message(env.encode(env.open_failed("spawn_failed", str(exc), open_id)))
                return
            await ws.send_message(env.encode(env.session_close(session_id, "exited", "the server exited")))


async def _to_child(child: Any, outbox: trio.MemoryReceiveChannel[Message]) -> None:
    async for message in outbox:
        await child.send([message])


@asynccontextmanager
async def running_hub(servers: Backends, token: str) -> AsyncIterator[MiniHub]:
    hub = MiniHub(servers, token)
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.serve)
        yield hub
        nursery.cancel_scope.cancel()
