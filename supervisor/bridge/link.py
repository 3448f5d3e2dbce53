"""BridgeLink: one accepted ``/v1/bridge`` socket, its frames and its sessions.

Three tasks in the link's nursery, plus one per session: the reader decodes frames
and acts on them (a frame it cannot use is answered ``mcp:error`` and the socket
lives on), the writer writes what is queued for the socket, and the idle watch
closes a socket that has seen no frame either way for ``bridge.idle_s`` (never a
registered peer's: waiting for sessions is its job; a dead one is found by the
heartbeats). Every write to the socket is made under the link's send lock, one frame
at a time: the writer's, and those of a caller that sends (``send``/``send_text``: a
session's lines, the reader's answers), which write in their own task so that a
round trip takes no task hop; a slow client slows its own servers' reads and nobody
else's. The tables and the link's state stay the reader's and the writer's. Frames
that must not wait are queued instead: ``post`` (at most ``OUTBOX``), and frames a
peer relays, since the peer's reader serves other clients too: a client that lets
more than ``RELAY_BUFFER_BYTES`` of them pile up is cut off (4429), its queue
dropped, its sessions closed, and nothing more is sent to it but the close. The
socket's end (the client left: the web framework cancels the handler) cancels the
nursery, and with it every session, whose processes are torn down under the stdio
teardown. Heartbeats are WebSocket pings sent by the server (Hypercorn's
``websocket_ping_interval`` = ``bridge.heartbeat_s``).

Close codes the hub uses: 1001 (the hub is shutting down), 4401 (no valid ``auth``
frame in time), 4403 (the token's role may not use the bridge), 4408 (idle), 4429
(too slow: it did not read what a peer sent it).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable
from typing import Protocol

import attrs
import orjson
import trio

from actors.log_events import get_logger
from actors.protocol import bridge_envelope as env
from actors.protocol.bridge_envelope import EnvelopeError, Frame
from supervisor.bridge.gate import AUTH_TIMEOUT_S, role_denial
from supervisor.bridge.hub import BridgeHub, BridgeSession
from supervisor.bridge.peers import Refused
from supervisor.bridge.session import offer, run_session
from supervisor.web.auth import TokenBook
from supervisor.web.roles import Action, Principal, authorize, denial_message

log = get_logger("supervisor.bridge")

OUTBOX = 64  # frames posted (``post``: answers that must not wait) waiting for the socket
RELAY_BUFFER_BYTES = 16 * 1024 * 1024  # frames relayed from peers waiting for the socket
CLOSE_WRITE_S = 1.0  # a close frame that cannot be written within this is given up
TOO_SLOW = "client_too_slow"


class Socket(Protocol):
    """What the link needs of an accepted WebSocket (Quart's ``websocket`` has it)."""

    async def send(self, data: str) -> None: ...

    async def receive(self) -> str | bytes: ...

    async def close(self, code: int, reason: str = "") -> None: ...


@attrs.frozen(slots=True)
class _Shut:
    code: int
    reason: str


@attrs.frozen(slots=True)
class _Relayed:
    text: str  # counted in ``relayed_bytes`` until written


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
        self.signin: Callable[[str], Awaitable[Principal | str]] | None = None
        """Sign-in for an ``auth`` frame's token that is no static one (the app's): who
        it signs in, or why not."""
        # One queue keeps every frame in order; the bounds are counted beside it.
        self._out, self._pending = trio.open_memory_channel[str | _Relayed | _Shut](math.inf)
        self._room = trio.Semaphore(OUTBOX)  # a str in the queue holds one
        self._send_lock = trio.Lock()  # held for each frame written (FIFO: trio's locks are fair)
        self._closed = False  # the socket's close was written: nothing goes after it
        self.relayed_bytes = 0
        self._cut: _Shut | None = None  # the writer sends this next, dropping the rest
        self.shut_reason: str | None = None
        self.sessions: dict[str, BridgeSession] = {}
        self.last_activity = trio.current_time()
        self.scope = trio.CancelScope()
        self._reading = trio.CancelScope()
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
                    with self._reading:
                        await self._read()
                    await trio.sleep_forever()  # cut off: the writer closes the socket, then cancels
        finally:
            self.hub.peers.gone(self, self.shut_reason or "socket_closed")
            self.hub.detach(self)

    # ------------------------------------------------------------------ output

    async def send(self, frame: Frame) -> None:
        await self.send_text(env.encode(frame))

    async def send_text(self, text: str) -> None:
        """Write a frame now, in the caller's task, once the frames ahead of it are
        written; dropped if the client was cut off or the socket closed. A free lock is
        taken without yielding (``acquire`` yields even then: a scheduling round per
        frame); it is fair all the same, as a waiter makes ``acquire_nowait`` fail."""
        lock = self._send_lock
        try:
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            if self._cut is None and not self._closed:
                await self.socket.send(text)
                self.last_activity = trio.current_time()
            else:
                await trio.lowlevel.checkpoint()
        finally:
            lock.release()

    def post(self, frame: Frame) -> None:
        """Queue a frame without waiting; dropped if ``OUTBOX`` frames wait."""
        try:
            self._room.acquire_nowait()
        except trio.WouldBlock:
            log.info("bridge: a frame to a closing or stalled socket was dropped")
            return
        self._queue(env.encode(frame))

    def relay(self, frame: Frame) -> None:
        """Queue a frame a peer sent without waiting; a client with more than
        ``RELAY_BUFFER_BYTES`` of them unwritten is cut off instead (nothing of a
        session that stays open is dropped: every one of them closes)."""
        if self._cut is not None:
            return  # its sessions are closed
        text = env.encode(frame)
        if self.relayed_bytes and self.relayed_bytes + len(text) > RELAY_BUFFER_BYTES:
            self._cut_off()
            return
        self.relayed_bytes += len(text)
        self._queue(_Relayed(text))

    def _cut_off(self) -> None:
        """End every session of a client too slow to read now (the writer may be stuck
        in a send: Hypercorn shields it), stop reading it, and have the writer send
        4429 next, when the client reads again, instead of what it fell behind on."""
        log.warning(
            "bridge: a client too slow for its peers was cut off", extra={"fields": {"client": self.client}}
        )
        self._cut = _Shut(4429, "too slow: the client did not read what its sessions sent")
        self.shut_reason = self.shut_reason or TOO_SLOW
        self._reading.cancel()
        for session in list(self.sessions.values()):
            session.close(TOO_SLOW)
        self.hub.peers.gone(self, TOO_SLOW)
        self._queue(self._cut)

    def _queue(self, item: str | _Relayed | _Shut) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            self._out.send_nowait(item)  # (a closing socket: nobody reads it any more)

    def shut(self, code: int, reason: str) -> None:
        """Close the socket (after what is queued) and end the link; its sessions stop
        with ``reason``. Bounded: the link ends within ``CLOSE_WRITE_S`` plus the queue."""
        self.shut_reason = self.shut_reason or reason
        for session in list(self.sessions.values()):
            if session.close_reason is None:
                session.close_reason = reason
        self._queue(_Shut(code, reason))
        self.scope.deadline = min(self.scope.deadline, trio.current_time() + 2 * CLOSE_WRITE_S)

    async def _write(self) -> None:
        async for item in self._pending:
            async with self._send_lock:
                item = self._cut or item
                if isinstance(item, _Shut):
                    with trio.move_on_after(CLOSE_WRITE_S):
                        await self.socket.close(item.code, item.reason)
                    self._closed = True
                    self.scope.cancel()
                    return
                if isinstance(item, _Relayed):
                    await self.socket.send(item.text)
                    self.relayed_bytes -= len(item.text)
                else:
                    await self.socket.send(item)
                    self._room.release()
                self.last_activity = trio.current_time()

    async def _watch_idle(self) -> None:
        while True:
            idle_s = self.hub.settings.idle_s
            deadline = self.last_activity + idle_s
            if self.hub.peers.registered(self):
                await trio.sleep(idle_s)  # a registered peer waits for sessions: never idle
                continue
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
                token = frame.data["token"]
                principal = self._tokens.principal_of(token)
                if principal is None and self.signin is not None:
                    checked = await self.signin(token)
                    principal, problem = (None, checked) if isinstance(checked, str) else (checked, problem)
                elif principal is None:
                    problem = "the token is not valid"
                if principal is not None:
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
            elif frame.type == env.PEER_REGISTER:  # a peer dialling with a token of another role
                assert self.principal is not None
                denied = denial_message(self.principal, Action.BRIDGE, "mcp:peer:register")
                await self.send(env.peer_register_result(error=("forbidden", denied), id=frame.id))
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
            shadowed = [name for name in taken if self.hub.exports(name)]  # the hub's own goes first
            fields = {"peer": self.client, "servers": taken, "shadowed": shadowed}
            log.info("bridge: peer registered", extra={"fields": fields})
            await self.send(env.peer_register_result(taken, id=frame.id, shadowed=shadowed))
        elif frame.type in (env.OPEN_RESULT, env.MESSAGE, env.CLOSE, env.ERROR):
            self.hub.peers.from_peer(self, frame)
        else:
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
                self.hub.refused(self.principal.tenant, server, refused, self.principal.person)
                await self.send(env.open_failed(refused.code, str(refused), frame.id))
                return
            self.hub.peers.open(self, self.principal.tenant, server, frame.id, self.principal.person)
            return
        try:
            session, spec = self.hub.reserve(
                self.principal.tenant, server, self.client, self.principal.person
            )
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
        if not offer(session, line):
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
