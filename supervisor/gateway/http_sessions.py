"""Handshake-era gateway sessions over Streamable HTTP, each held by a task we own.

One MCP session (one ``Mcp-Session-Id``) is one supervisor ``Session``: its
activations, its approvals and its ``scope: session`` servers. As in
``admin/hosted.py``, a session outlives the request that opened it, so each one gets
a *holder* task in ``GatewaySessions``' nursery that enters ``sup.session(tenant=…)``
and a nursery of the session's own, where its requests are answered (a client that
drops a POST stream does not cancel the request: the spec says a disconnect is not a
cancel, and the client may resume the stream) and where tasks attached to every
session run (``session_tasks``: e.g. the notices a client is sent).

A session ends by ``DELETE /mcp``, by idle expiry (``gateway.session_idle_s`` with
no request; never while a call is in flight), or at shutdown; its requests still in
flight are cancelled and answered with an error, its streams end, its servers stop.
Each tenant holds at most ``gateway.max_sessions_per_tenant`` sessions. Lookups take
the caller's tenant: another tenant's id is simply unknown (404, as for an expired
one). Opening and closing are events on the supervisor's broadcast
(``gateway_session_opened`` / ``gateway_session_closed``, to that tenant's stream).
"""

from __future__ import annotations

import importlib.metadata
import itertools
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from actors.log_events import get_logger
from actors.protocol.jsonrpc import to_wire
from actors.protocol.server_session import error_response
from supervisor.cluster.keys import SharedKeys
from supervisor.cluster.session_ids import SessionIds
from supervisor.cluster.session_state import SessionState
from supervisor.gateway.peer import GatewayPeer
from supervisor.gateway.results import INTERNAL_ERROR, JsonRpcError
from supervisor.gateway.session_restore import restore
from supervisor.gateway.sse_events import EventStream, Scrub, StreamOutlet, _as_is
from supervisor.gateway.traced import HTTP, Arrival
from supervisor.runtime.tracing import TRACING
from supervisor.web.held_sessions import HeldSessions

if TYPE_CHECKING:
    from supervisor.service import Supervisor

log = get_logger("supervisor.gateway")

FORGET_BOUND_S = 5.0
"""How long a session's end waits for the store to release its row."""
KEEP_STREAMS = 32
"""POST streams a session keeps for resumption (the oldest finished ones go first)."""
STANDALONE = "0"


class SessionRoaming(Protocol):
    """What the sessions tell the store of a replica's sessions (``roaming.py``)."""

    async def opened(self, record: GatewaySession) -> None: ...

    async def after(self, record: GatewaySession) -> None: ...

    async def ended(self, record: GatewaySession, *, hand_over: bool) -> None: ...


class GatewayClosed(RuntimeError):
    """The gateway is not running (not started yet, or shutting down)."""


class TooManyGatewaySessions(RuntimeError):
    """A tenant already holds ``gateway.max_sessions_per_tenant`` sessions."""


@attrs.define(eq=False)
class GatewaySession:
    """One open MCP session: its peer, its streams and its clocks."""

    peer: GatewayPeer
    nursery: trio.Nursery
    scrub: Scrub = attrs.field(default=_as_is, kw_only=True)
    """Every event's message passes through it (the config's secrets masked)."""
    opened_at: float = attrs.field(factory=time.time)
    last_seen: float = attrs.field(factory=trio.current_time)
    standalone: EventStream = attrs.field(
        default=attrs.Factory(lambda self: EventStream(STANDALONE, scrub=self.scrub), takes_self=True)
    )
    streams: OrderedDict[str, EventStream] = attrs.field(factory=OrderedDict)
    close_requested: trio.Event = attrs.field(factory=trio.Event)
    closed: trio.Event = attrs.field(factory=trio.Event)
    announced: bool = False
    answering: int = 0
    """Requests handed to ``answer`` and not answered yet (a drain waits for them)."""
    _activity: trio.Event = attrs.field(factory=trio.Event)
    _awaited: bool = False  # the idle watcher waits for activity (a call in flight)
    _stream_ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))

    @property
    def id(self) -> str:
        return self.peer.session.id

    @property
    def tenant(self) -> str:
        return self.peer.session.tenant

    def touch(self) -> None:
        """A request came or was answered: the idle clock starts again. The idle
        watcher sleeps until its deadline and reads ``last_seen`` then, so a touch
        wakes no task unless the watcher waits for a call in flight to end."""
        self.last_seen = trio.current_time()
        if self._awaited:
            self._activity.set()
            self._activity = trio.Event()

    async def activity(self) -> None:
        """Until the next ``touch``."""
        self._awaited = True
        try:
            await self._activity.wait()
        finally:
            self._awaited = False

    def new_stream(self) -> EventStream:
        """A POST's SSE stream, kept (bounded) for resumption by ``Last-Event-ID``."""
        stream = EventStream(str(next(self._stream_ids)), scrub=self.scrub)
        self.streams[stream.id] = stream
        while len(self.streams) > KEEP_STREAMS:
            self.streams.popitem(last=False)
        return stream

    def stream(self, stream_id: str) -> EventStream | None:
        return self.standalone if stream_id == STANDALONE else self.streams.get(stream_id)

    def outlet(self) -> StreamOutlet:
        """The standalone (``GET``) stream's outlet: messages no request caused."""
        return StreamOutlet(self.standalone)


SessionTask = Callable[[GatewaySession], Awaitable[None]]


class GatewaySessions(HeldSessions[GatewaySession]):
    """The gateway's MCP sessions, by id, per tenant (see the module docstring)."""

    not_running = GatewayClosed
    not_running_text = "the MCP gateway is not running (the service is starting or stopping)"

    def __init__(self, supervisor: Supervisor, *, version: str | None = None, scrub: Scrub = _as_is) -> None:
        super().__init__()
        self._supervisor = supervisor
        self._version = version if version is not None else installed_version()
        self.session_tasks: list[SessionTask] = []
        """Run in every session's nursery from its opening until it ends."""
        self.scrub = scrub
        """What every session's events pass through (the server's secret scrubber)."""
        self.counts: Counter[str] = Counter()
        """Sessions ``opened``, ``closed``, ``expired`` (idle) and ``refused`` (over the
        tenant's bound), for the metrics."""
        self.ids = SessionIds(SharedKeys(), None)
        """How session ids are minted (a replica's name it: ``cluster/session_ids.py``)."""
        self.roaming: SessionRoaming | None = None
        """With a cluster: sessions kept in the shared store and taken over (``roaming.py``)."""
        self.handing_over = False
        """A drain: sessions that end now are handed over, not ended, in the store."""
        self._answered = trio.Event()  # set (and renewed) as each request is answered

    def _stopping(self) -> None:
        self.close_streams()

    # ------------------------------------------------------------------ sessions

    async def open(
        self,
        tenant: str,
        person: str | None = None,
        *,
        session_id: str | None = None,
        state: SessionState | None = None,
    ) -> GatewaySession:
        """A new session of ``tenant`` made for ``person`` (None: the tenant's name); it
        lives until ``close``, idle expiry or shutdown. ``session_id`` and ``state``: a
        session taken over from another replica (``roaming.py``)."""
        nursery = self._running()
        bound = self._supervisor.config.gateway.max_sessions_per_tenant
        if len(self.listing(tenant)) >= bound:
            self.counts["refused"] += 1
            raise TooManyGatewaySessions(
                f"tenant {tenant!r} already holds {bound} MCP sessions, the bound "
                "(gateway.max_sessions_per_tenant); end one with DELETE /mcp or raise the bound"
            )
        session_id = session_id if session_id is not None else self.ids.mint()
        record: GatewaySession = await nursery.start(self._hold, tenant, person, session_id, state)
        return record

    def get(self, session_id: str, tenant: str | None) -> GatewaySession | None:
        """The open session, if it belongs to ``tenant`` (None: to any tenant)."""
        return self._lookup(session_id, tenant)

    def listing(self, tenant: str | None) -> list[GatewaySession]:
        """The open sessions of ``tenant`` (None: of every tenant), oldest first."""
        return self._open(tenant)

    async def close(self, session_id: str, tenant: str | None, *, timeout_s: float = 15.0) -> bool:
        """End a session and wait (bounded) until its servers are gone."""
        return await self._close(session_id, tenant, timeout_s)

    def announce(self, record: GatewaySession) -> None:
        """The session is initialized: tell the event stream (once)."""
        if record.announced:
            return
        record.announced = True
        self.counts["opened"] += 1
        peer = record.peer
        self._publish(
            record,
            "gateway_session_opened",
            {"protocol_version": peer.protocol_version, "client": dict(peer.client_info or {})},
        )

    def close_streams(self) -> None:
        """End every standalone stream (shutdown: open GETs must not hold the drain)."""
        for record in self._sessions.values():
            record.standalone.finish()

    async def hand_over(self) -> None:
        """A replica's drain: hand every session over as soon as it has no call in
        flight (bound it with a cancel scope; ``end_all`` ends the rest)."""
        self.handing_over = True
        while True:
            answered = self._answered
            busy = 0
            for record in list(self._sessions.values()):
                if record.answering or record.peer.core.in_flight:
                    busy += 1
                else:
                    record.close_requested.set()
            if not busy:
                return
            await answered.wait()

    def end_all(self) -> None:
        """End every session (the drain: its requests still in flight are answered with
        an error, so their streams end before Hypercorn's deadline cuts them)."""
        for record in self._sessions.values():
            record.close_requested.set()

    # ----------------------------------------------------------------- requests

    def answer(
        self,
        record: GatewaySession,
        message: Mapping[str, Any],
        outlet: StreamOutlet,
        stream: EventStream,
        arrival: Arrival | None = None,
    ) -> None:
        """Answer one request in the session's nursery; its response ends ``stream``
        (a request the client cancelled ends it without one)."""
        record.answering += 1
        record.nursery.start_soon(self._answer, record, message, outlet, stream, arrival)

    async def _answer(
        self,
        record: GatewaySession,
        message: Mapping[str, Any],
        outlet: StreamOutlet,
        stream: EventStream,
        arrival: Arrival | None,
    ) -> None:
        response: dict[str, Any] | None = None
        answered = False
        try:
            response = await record.peer.receive(message, outlet, arrival)
            answered = True
            if self.roaming is not None:  # what the client is told is what a takeover restores
                await self.roaming.after(record)
        except Exception:
            log.exception("gateway request failed", extra={"fields": {"session": record.id}})
        finally:
            record.answering -= 1
            record.touch()
            if self.handing_over:  # the drain waits for calls to end
                self._answered.set()
                self._answered = trio.Event()
            if response is not None:
                stream.publish(response, response=True)
            elif answered:  # the client cancelled it: no response
                stream.end_cancelled()
            else:
                why = "the request failed in the supervisor; see its log"
                if record.close_requested.is_set():
                    why = "the session ended before this request was answered"
                failed = error_response(message.get("id"), JsonRpcError(INTERNAL_ERROR, why))
                stream.publish(to_wire(failed), response=True)

    def start_background(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``fn(*args)`` in the gateway's own nursery (new-era requests)."""
        self._running().start_soon(fn, *args)

    # ------------------------------------------------------------------ holders

    async def _hold(
        self,
        tenant: str,
        person: str | None,
        session_id: str | None,
        state: SessionState | None,
        *,
        task_status: trio.TaskStatus[GatewaySession],
    ) -> None:
        sup = self._supervisor
        record: GatewaySession | None = None
        try:
            async with sup.session(tenant=tenant, person=person, session_id=session_id) as session:
                peer = GatewayPeer(
                    session,
                    lambda key: sup.requests.cancel(key, tenant),
                    prefix=sup.config.gateway.prefix,
                    version=self._version,
                    arrival=HTTP,
                )
                try:
                    async with trio.open_nursery() as nursery:
                        record = GatewaySession(peer, nursery, scrub=self.scrub)
                        if state is not None:
                            restore(peer, state)
                            record.announced = True  # opened on the replica it came from
                        self._sessions[record.id] = record
                        for task in self.session_tasks:
                            nursery.start_soon(task, record)
                        nursery.start_soon(self._expire_when_idle, record)
                        task_status.started(record)
                        await record.close_requested.wait()
                        nursery.cancel_scope.cancel()
                finally:
                    if record is not None:
                        self._end(record)
                        await self._forget(record)
        except Exception:
            if record is None:
                raise  # not started yet: the initialize gets the error
            log.exception("gateway session failed", extra={"fields": {"session": record.id}})
        finally:
            if record is not None:
                record.closed.set()

    def _end(self, record: GatewaySession) -> None:
        record.close_requested.set()
        self._sessions.pop(record.id, None)
        if (tracing := TRACING.active) is not None and record.peer.initialized:
            tracing.session_ended(time.time() - record.opened_at, "tcp", record.peer.protocol_version)
        record.peer.close("the MCP session ended")
        record.standalone.finish()
        for stream in record.streams.values():
            stream.finish()
        if record.announced:
            self.counts["closed"] += 1
            self._publish(record, "gateway_session_closed", {})

    async def _forget(self, record: GatewaySession) -> None:
        """With a cluster: the session's row goes (or, in a drain, is handed over)."""
        if self.roaming is None:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(FORGET_BOUND_S):
            try:
                await self.roaming.ended(record, hand_over=self.handing_over)
            except Exception:
                log.exception(
                    "gateway session not released in the store", extra={"fields": {"session": record.id}}
                )

    async def _expire_when_idle(self, record: GatewaySession) -> None:
        """End the session once it has been idle ``gateway.session_idle_s``; a call in
        flight keeps it open (its answer starts the idle clock again)."""
        while True:
            deadline = record.last_seen + self._supervisor.config.gateway.session_idle_s
            if trio.current_time() < deadline:
                await trio.sleep_until(deadline)  # then the deadline of the newest touch
                continue
            if record.peer.core.in_flight:
                await record.activity()
                continue
            log.info("gateway session expired", extra={"fields": {"session": record.id}})
            self.counts["expired"] += 1
            record.close_requested.set()
            return

    def _publish(self, record: GatewaySession, kind: str, fields: Mapping[str, Any]) -> None:
        event = {"type": kind, "tenant": record.tenant, "session": record.id, **fields}
        self._supervisor.events.publish(event)


def installed_version() -> str:
    """Our version as installed (``serverInfo.version``); "0" when not installed."""
    try:
        return importlib.metadata.version("trio-mcp-supervisor")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def session_item(record: GatewaySession, now: float | None = None) -> dict[str, Any]:
    """One session as ``GET /v1/gateway/sessions`` lists it."""
    peer = record.peer
    core = peer.core
    return {
        "session_id": record.id,
        "era": "handshake",
        "protocol_version": peer.protocol_version,
        "client": dict(peer.client_info) if peer.client_info is not None else None,
        "tenant": record.tenant,
        "age_s": round((time.time() if now is None else now) - record.opened_at, 3),
        "turns": core.turns,
        "in_flight": core.in_flight,
        "servers": sorted(core.catalog().servers),
    }
