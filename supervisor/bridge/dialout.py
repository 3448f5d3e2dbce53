"""A dial-out bridge peer (``mcp-supervisor bridge``): offer local servers to a hub.

A machine behind NAT cannot be dialled, so it dials: it connects out to a hub's
``/v1/bridge`` with a ``peer`` token, registers its ``bridge: true`` servers (each with
the digest of its launch config, ``peers.launch_digest``) and then serves the
sessions the hub opens on it, each a process of its own. A session here runs the
hub's own code (``session.run_session``: the raw passthrough under the stdio
transport's spawn and process-group teardown); this module only plays the socket
(``PeerLink``) and the host of those sessions. When the connection ends every
session's process is torn down, and the peer connects again on the reconnect
schedule (``actors/connection/schedule.py``: about 1, 2, 5, 15, 60 s, each delay
jittered by a tenth) and registers again. A registration
the hub refuses (a name another peer offers with another launch config) is final:
``PeerRefused``, retrying would not change it. A token the hub refuses (401 before
the upgrade, or a role other than ``peer``: the register's ``forbidden``) is one
error naming the hub and the role needed, logged once while it lasts, and tried
again at the schedule's last delay: the hub's tokens may change, the peer's will not
by itself. A name the hub also exports itself is registered, but the hub's own is
used first: the register result says which (``shadowed``), and the peer warns once.

The peer caps its own processes (its config's ``bridge.max_processes``; a process
counts until it is reaped): an open over the cap is answered ``too_many_processes``,
which the hub passes to the client. A message for a session it no longer runs is
answered ``mcp:error`` ``unknown_session``, on which the hub ends the session on its
client. The hub keeps a registered peer's socket however long no session comes; its
pings keep the connection (and any NAT on the way) alive.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager

import orjson
import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    WebSocketConnection,
    open_websocket_url,
)

from actors.connection import retry
from actors.connection.retry import Draw
from actors.connection.schedule import ReconnectSchedule
from actors.log_events import get_logger
from actors.protocol import bridge_envelope as env
from actors.protocol.bridge_envelope import Frame
from actors.spec import DEFAULT_RECONNECT_JITTER, DEFAULT_RECONNECT_SCHEDULE_S, ServerSpec
from actors.transports.connector import TransportConnector
from actors.transports.raw_stdio import RawStdio
from actors.transports.websocket import PongsAfterClose
from supervisor.bridge.hub import BridgeSession
from supervisor.bridge.peers import launch_digest
from supervisor.bridge.session import SessionHost, offer, run_session
from supervisor.settings.model import BridgeSettings

log = get_logger("supervisor.bridge.peer")

OUTBOX = 64
DEFAULT_MAX_PROCESSES = BridgeSettings().max_processes
REGISTER_ID = "register"
Registered = Callable[[list[str]], None]  # told the names the hub took, each time


class PeerRefused(Exception):
    """The hub refused this peer's registration (the message says why)."""


class TokenRefused(Exception):
    """The hub refused this peer's token or its role (the message is the hub's why)."""


def rejection(exc: ConnectionRejected) -> str:
    """What the hub said when it refused the upgrade: its status and its error's
    message (the body's, cut), never its headers. A 401 is said in our words: the
    hub's ("the bearer token is not valid") reads as a secret to the log's masking."""
    if exc.status_code == 401:
        return "HTTP 401: the hub does not know this token"
    said = ""
    with contextlib.suppress(orjson.JSONDecodeError, LookupError, TypeError):
        said = str(orjson.loads(exc.body or b"")["error"]["message"])[:200]
    return f"HTTP {exc.status_code}" + (f": {said}" if said else "")


def exported(servers: tuple[ServerSpec, ...]) -> dict[str, ServerSpec]:
    """The servers a peer offers: enabled local ones configured with ``bridge: true``."""
    return {s.name: s for s in servers if s.bridge and s.enabled and s.type == "local"}


class PeerLink:
    """One connection to the hub; ``run`` returns (or raises) when it ends."""

    def __init__(
        self,
        ws: WebSocketConnection,
        specs: Mapping[str, ServerSpec],
        connector: TransportConnector,
        max_processes: int = DEFAULT_MAX_PROCESSES,
        *,
        hub_url: str = "",
        shadowed_told: set[str] | None = None,
    ) -> None:
        self.ws = ws
        self._specs = specs
        self._connector = connector
        self._max_processes = max_processes
        self._hub_url = hub_url
        self._shadowed_told = shadowed_told if shadowed_told is not None else set()
        """Names the hub said it shadows that were logged already (once a process)."""
        self.processes = 0  # sessions from their open until their process is reaped
        self.sessions: dict[str, BridgeSession] = {}
        self._out, self._pending = trio.open_memory_channel[str](OUTBOX)

    # ---------------------------------------------------- the sessions' host

    @property
    def hub(self) -> SessionHost:
        return self

    @property
    def max_message_bytes(self) -> int:
        return env.DEFAULT_MAX_BYTES

    def open_process(self, session: BridgeSession, spec: ServerSpec) -> AbstractAsyncContextManager[RawStdio]:
        return self._connector.open_raw(spec)

    def opened(self, session: BridgeSession) -> None:
        session.state = "open"

    def ended(self, session: BridgeSession, failed: str | None = None) -> None:
        self.processes -= 1
        log.info("bridge peer: session ended", extra={"fields": {"session": session.id, "failed": failed}})

    # --------------------------------------------------------------- output

    async def send(self, frame: Frame) -> None:
        await self.send_text(env.encode(frame))

    async def send_text(self, text: str) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self._out.send(text)

    def post(self, frame: Frame) -> None:
        with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            self._out.send_nowait(env.encode(frame))

    async def _write(self, link: trio.CancelScope) -> None:
        """The only writer; a closed socket ends the link (the reader sees it too)."""
        with contextlib.suppress(ConnectionClosed):
            async for text in self._pending:
                await self.ws.send_message(text)
        link.cancel()

    # ---------------------------------------------------------------- input

    async def _next(self) -> Frame | None:
        decoded = env.decode(await self.ws.get_message(), self.max_message_bytes)
        if isinstance(decoded, env.EnvelopeError):
            log.warning(
                "bridge peer: a frame from the hub was refused",
                extra={"fields": {"problem": decoded.message}},
            )
            return None
        return decoded

    async def run(self, registered: Registered) -> None:
        """Register, then serve the hub's frames until the socket closes (returns; every
        session's process torn down) or the hub refuses the registration (PeerRefused;
        TokenRefused when it is the token's role)."""
        refusal: PeerRefused | TokenRefused | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._write, nursery.cancel_scope)
            with contextlib.suppress(ConnectionClosed):
                try:
                    await self._registered_then_serve(registered, nursery)
                except (PeerRefused, TokenRefused) as refused:
                    refusal = refused
            nursery.cancel_scope.cancel()
        if refusal is not None:
            raise refusal  # bare, not in the nursery's group: run_peer tells them apart

    async def _registered_then_serve(self, registered: Registered, nursery: trio.Nursery) -> None:
        offered = [(name, launch_digest(spec)) for name, spec in sorted(self._specs.items())]
        await self.send(env.peer_register(offered, id=REGISTER_ID))
        while (answer := await self._next()) is None or not _answers_register(answer):
            pass
        error = answer.data if answer.type == env.ERROR else answer.data.get("error")
        if isinstance(error, Mapping):
            why = str(error.get("message"))
            if answer.type == env.ERROR or error.get("code") == "forbidden":
                raise TokenRefused(why)  # a hub that takes no registration from this token
            raise PeerRefused(f"the hub refused this peer: {why}")
        self._tell_shadowed(answer.data.get("shadowed"))
        registered(list(answer.data.get("servers", [])))
        while True:
            frame = await self._next()
            if frame is not None:
                await self._serve(frame, nursery)

    def _tell_shadowed(self, names: object) -> None:
        """Warn (once a process) of names the hub exports itself: its clients get the hub's."""
        told = self._shadowed_told
        new = [n for n in names if isinstance(n, str) and n not in told] if isinstance(names, list) else []
        if new:
            told.update(new)
            log.warning(
                "bridge peer: the hub exports a server of this name itself and uses its own first, "
                "so its clients do not reach this peer's; rename it here to offer it",
                extra={"fields": {"hub": self._hub_url, "servers": ", ".join(new)}},
            )

    async def _serve(self, frame: Frame, nursery: trio.Nursery) -> None:
        sid = frame.data.get("sessionId")
        if frame.type == env.OPEN and isinstance(sid, str):
            spec = self._specs.get(frame.data["serverName"])
            if spec is None:
                problem = f"this peer does not export {frame.data['serverName']!r}"
                await self.send(env.open_failed("not_exported", problem, frame.id))
                return
            if self.processes >= self._max_processes:
                problem = (
                    f"the bridge peer runs {self.processes} processes, its cap (bridge.max_processes "
                    "in its config); retry when a session has closed"
                )
                await self.send(env.open_failed("too_many_processes", problem, frame.id))
                return
            self.processes += 1
            session = BridgeSession(sid, "", spec.name, "hub", trio.current_time(), time.time())
            nursery.start_soon(run_session, self, session, spec, frame.id)
            return
        running = self.sessions.get(sid) if isinstance(sid, str) else None
        if running is None:
            if frame.type == env.MESSAGE:  # its close may be on its way, or was lost: say so
                problem = f"this peer runs no session {sid!r}"
                await self.send(env.error("unknown_session", problem, sid, frame.id))
            return
        if frame.type == env.MESSAGE:  # never waits: a process that stopped reading is closed
            offer(running, orjson.dumps(frame.data["jsonrpc"]))
        elif frame.type == env.CLOSE:
            running.close("client_closed")


async def run_peer(
    url: str,
    token: str,
    specs: Mapping[str, ServerSpec],
    connector: TransportConnector,
    *,
    schedule: ReconnectSchedule | None = None,
    registered: Registered = lambda names: None,
    max_processes: int = DEFAULT_MAX_PROCESSES,
    draw: Draw = retry.draw,
) -> None:
    """Connect, register, serve; on a drop wait the schedule's delay (jittered by
    ``draw``, so peers cut off together do not dial together; a refused token: its last
    delay) and do it again. Returns never; raises PeerRefused when the hub refuses the
    registration."""
    schedule = schedule or ReconnectSchedule(DEFAULT_RECONNECT_SCHEDULE_S, jitter=DEFAULT_RECONNECT_JITTER)
    headers = [(b"authorization", f"Bearer {token}".encode())]
    attempt = 0
    shadowed_told: set[str] = set()
    refusal_told: str | None = None
    while True:
        since: float | None = None
        refused: str | None = None
        error: str | None = None
        try:
            async with (
                PongsAfterClose() as closing,
                open_websocket_url(url, extra_headers=headers, max_message_size=env.DEFAULT_MAX_BYTES) as ws,
            ):
                since = trio.current_time()
                link = PeerLink(ws, specs, connector, max_processes, hub_url=url, shadowed_told=shadowed_told)
                try:
                    await link.run(registered)
                finally:
                    closing.began = True
        except ConnectionRejected as exc:
            if exc.status_code in (401, 403):
                refused = rejection(exc)
            else:
                error = rejection(exc)
        except TokenRefused as exc:
            refused = str(exc)
        except (HandshakeError, ConnectionClosed, OSError, trio.BrokenResourceError) as exc:
            error = str(exc)
        if refused is not None:
            attempt = len(schedule.delays)  # the hub's tokens may change, not soon
            delay = schedule.delay(attempt, draw())
            if refused != refusal_told:
                _token_refused(url, refused, delay)
            refusal_told = refused
        else:
            refusal_told = None
            steady = None if since is None else trio.current_time() - since
            attempt = schedule.next_attempt(attempt, steady)
            delay = schedule.delay(attempt, draw())
            if error is not None:
                _not_connected(url, error, delay)
        await trio.sleep(delay)


def _answers_register(frame: Frame) -> bool:
    """The register's result, or an error a hub answered it with."""
    return frame.type == env.PEER_REGISTER_RESULT or (frame.type == env.ERROR and frame.id == REGISTER_ID)


def _not_connected(url: str, error: str, retry_s: float) -> None:
    fields = {"hub": url, "error": error, "retry_in_s": round(retry_s, 3)}
    log.warning("bridge peer: not connected to the hub", extra={"fields": fields})


def _token_refused(url: str, why: str, retry_s: float) -> None:
    log.error(
        "bridge peer: the hub refused this peer's token; mcp-supervisor bridge needs a token "
        "that the hub's admin.tokens gives the peer role (trying again at the schedule's last delay)",
        extra={"fields": {"hub": url, "hub_said": why, "retry_every_s": round(retry_s, 3)}},
    )
