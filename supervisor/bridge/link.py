"""BridgeLink: one accepted ``/v1/bridge`` socket, its frames and its sessions.

Three tasks in the link's nursery, plus one per session: the reader decodes frames
and acts on them (a frame it cannot use is answered ``mcp:error`` and the socket
lives on), the writer is the only task that writes to the socket (sessions queue
their frames on a bounded channel, so a slow client slows its own servers' reads and
nobody else's), and the idle watch closes a socket that has seen no frame either way
for ``bridge.idle_s``. The socket's end (the client left: the web framework cancels
the handler) cancels the nursery, and with it every session, whose processes are
torn down under the stdio teardown. Heartbeats are WebSocket pings sent by the
server (Hypercorn's ``websocket_ping_interval`` = ``bridge.heartbeat_s``).

Close codes the hub uses: 1001 (the hub is shutting down), 4401 (no valid ``auth``
frame in time), 4403 (the token's role may not use the bridge), 4408 (idle).
"""

from __future__ import annotations

import contextlib
from typing import Protocol

import attrs
import orjson
import trio

from actors.log_events import get_logger
from actors.protocol import bridge_envelope as env
from actors.protocol.bridge_envelope import EnvelopeError, Frame
from supervisor.admin.auth import TokenBook
from supervisor.admin.roles import Action, Principal, authorize
from supervisor.bridge.gate import AUTH_TIMEOUT_S, role_denial
from supervisor.bridge.hub import BridgeHub, BridgeSession
from supervisor.bridge.peers import Refused
from supervisor.bridge.session import run_session

log = get_logger("supervisor.bridge")

OUTBOX = 64
CLOSE_WRITE_S = 1.0  # a close frame that cannot be written within this is given up


class Socket(Protocol):
    """What the link needs of an accepted WebSocket (Quart's ``websocket`` has it)."""

    async def send(self, data: str) -> None: ...

    async def receive(self) -> str | bytes: ...

    async def close(self, code: int, reason: str = "") -> None: ...


@attrs.frozen(slots=True)
class _Shut:
    code: int
    reason: str


class BridgeLink:
    """One socket; ``run`` returns when it is over (every session torn down)."""

    def __init__(
        self, hub: BridgeHub, socket: Socket, principal: Principal | None, client: str, tokens: TokenBook
    ) -> None:
        self.hub = hub
        self.socket = socket
        self.principal = principal
        self.client = client
        self._tokens = tokens
        self._out, self._pending = trio.open_memory_channel[str | _Shut](OUTBOX)
        self.sessions: dict[str, BridgeSession] = {}
        self.last_activity = trio.current_time()
        self.scope = trio.CancelScope()
        self._nursery: trio.Nursery | None = None

    async def run(self) -> None:
        self.hub.attach(self)
        try:
            with self.scope:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._write)
                    nursery.start_soon(self._watch_idle)
                    if self.principal is None and not await self._authenticate():
                        await trio.sleep_forever()  # the writer closes the socket, then cancels
                    await self._read()
        finally:
            self.hub.peers.gone(self)
            self.hub.detach(self)

    # ------------------------------------------------------------------ output

    async def send(self, frame: Frame) -> None:
        await self.send_text(env.encode(frame))

    async def send_text(self, text: str) -> None:
        """Queue a frame for the writer, waiting while the queue is full."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self._out.send(text)  # (a closing socket: nobody reads it any more)

    def post(self, frame: Frame) -> None:
        """Queue a frame without waiting; dropped if the queue is full or closed."""
        try:
            self._out.send_nowait(env.encode(frame))
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            log.info("bridge: a frame to a closing or stalled socket was dropped")

    def shut(self, code: int, reason: str) -> None:
        """Close the socket (after what is queued) and end the link; its sessions stop
        with ``reason``. Bounded: the link ends within ``CLOSE_WRITE_S`` plus the queue."""
        for session in list(self.sessions.values()):
            if session.close_reason is None:
                session.close_reason = reason
        try:
            self._out.send_nowait(_Shut(code, reason))
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            self.scope.cancel()
        self.scope.deadline = min(self.scope.deadline, trio.current_time() + 2 * CLOSE_WRITE_S)

    async def _write(self) -> None:
        async for item in self._pending:
            if isinstance(item, _Shut):
                with trio.move_on_after(CLOSE_WRITE_S):
                    await self.socket.close(item.code, item.reason)
                self.scope.cancel()
                return
            await self.socket.send(item)
            self.last_activity = trio.current_time()

    async def _watch_idle(self) -> None:
        while True:
            idle_s = self.hub.settings.idle_s
            deadline = self.last_activity + idle_s
            if trio.current_time() >= deadline:
                log.info("bridge: idle socket closed", extra={"fields": {"client": self.client}})
                self.shut(4408, "idle")
                return
            await trio.sleep_until(deadline)

    # ------------------------------------------------------------------- input

    async def _receive(self) -> Frame | EnvelopeError:
        data = await self.socket.receive()
        self.last_activity = trio.current_time()
        return env.decode(data, self.hub.max_message_bytes)

    async def _authenticate(self) -> bool:
        """A socket that presented no credential: its first frame must be ``auth``."""
        problem = f"send an auth frame with a token first (within {AUTH_TIMEOUT_S:g} s)"
        with trio.move_on_after(AUTH_TIMEOUT_S):
            frame = await self._receive()
            if isinstance(frame, Frame) and frame.type == env.AUTH:
                principal = self._tokens.principal_of(frame.data["token"])
                if principal is None:
                    problem = "the token is not valid"
                else:
                    denial = role_denial(principal)
                    if denial is None:
                        self.principal = principal
                        return True
                    self.post(env.error("forbidden", denial.message))
                    self.shut(4403, "forbidden")
                    return False
        self.post(env.error("unauthorized", problem))
        self.shut(4401, "unauthorized")
        return False

    async def _read(self) -> None:
        while True:
            frame = await self._receive()
            if isinstance(frame, EnvelopeError):
                await self.send(env.of_error(frame))
            elif self._is_peer():
                await self._peer_frame(frame)
            elif frame.type == env.MESSAGE:
                await self._message(frame)
            elif frame.type == env.OPEN:
                await self._open(frame)
            elif frame.type == env.CLOSE:
                await self._close(frame)
            elif frame.type == env.AUTH:
                problem = "this socket is authenticated already"
                await self.send(env.error("unexpected_frame", problem, id=frame.id))
            else:
                problem = f"frame type {frame.type!r} is not served by this hub"
                await self.send(env.error("unknown_type", problem, id=frame.id))

    def _is_peer(self) -> bool:
        return self.principal is not None and authorize(self.principal, Action.BRIDGE)

    async def _peer_frame(self, frame: Frame) -> None:
        """A peer's frame: its registration, or its side of a relayed session."""
        if frame.type == env.PEER_REGISTER:
            try:
                taken = self.hub.peers.register(self, frame.data["servers"])
            except Refused as refused:
                await self.send(env.peer_register_result(error=(refused.code, str(refused)), id=frame.id))
                return
            log.info("bridge: peer registered", extra={"fields": {"peer": self.client, "servers": taken}})
            await self.send(env.peer_register_result(taken, id=frame.id))
        elif frame.type in (env.OPEN_RESULT, env.MESSAGE, env.CLOSE):
            await self.hub.peers.from_peer(self, frame)
        elif frame.type != env.ERROR:
            problem = f"a peer sends mcp:peer:register and answers sessions; {frame.type!r} is not served"
            await self.send(env.error("unknown_type", problem, id=frame.id))

    def _session(self, frame: Frame) -> BridgeSession | None:
        """This socket's session the frame names; None (answered) when there is none."""
        sid = frame.data["sessionId"]
        session = self.sessions.get(sid)
        if session is None:
            self.post(env.error("unknown_session", f"no open session {sid!r} on this socket", sid, frame.id))
        return session

    async def _open(self, frame: Frame) -> None:
        assert self.principal is not None and self._nursery is not None
        server = frame.data["serverName"]
        if not self.hub.exports(server) and self.hub.peers.offers(server):
            try:
                self.hub.check_open(self.principal.tenant)
            except Refused as refused:
                await self.send(env.open_failed(refused.code, str(refused), frame.id))
                return
            self.hub.peers.open(self, self.principal.tenant, server, frame.id)
            return
        try:
            session, spec = self.hub.reserve(self.principal.tenant, server, self.client)
        except Refused as refused:
            await self.send(env.open_failed(refused.code, str(refused), frame.id))
            return
        self._nursery.start_soon(run_session, self, session, spec, frame.id)

    async def _message(self, frame: Frame) -> None:
        relayed = self.hub.peers.of_client(self, frame.data["sessionId"])
        if relayed is not None:
            await self.hub.peers.from_client(relayed, frame)
            return
        session = self._session(frame)
        if session is None:
            return
        try:
            line = orjson.dumps(frame.data["jsonrpc"])
        except orjson.JSONEncodeError as exc:
            await self.send(env.error(env.MALFORMED, f"data.jsonrpc cannot be written as one line: {exc}"))
            return
        session.messages_in += 1
        try:
            await session.inbox.send(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            problem = f"session {session.id!r} has closed"
            self.post(env.error("unknown_session", problem, session.id, frame.id))

    async def _close(self, frame: Frame) -> None:
        relayed = self.hub.peers.of_client(self, frame.data["sessionId"])
        if relayed is not None:
            await self.hub.peers.from_client(relayed, frame)
            return
        session = self._session(frame)
        if session is not None:
            session.close_id = frame.id
            session.close("client_closed")
