"""The admin API's handlers, one method per ``openapi.ROUTES`` operation.

Handlers read the principal the guard put on ``g`` (the guard has already checked
its role against the route's action). Every lookup of a session, turn, approval or
request goes through its tenant, so another tenant's object is a 404; where the
operator sees every tenant (``Principal.scope`` is None: listing and answering
approvals, listing and closing sessions, the event stream), the lookup takes that
scope instead. Answers are built by the pure functions of ``views.py`` and leave
through ``json_response``, which scrubs the config's secret values.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

import orjson
import trio
from quart import request
from quart_trio.wrappers import TrioResponse
from quart_trio.wrappers.response import TrioIterableBody

from actors.connection.messages import Control
from actors.protocol.json_depth import JSON_MAX_DEPTH
from actors.redaction import Redactor
from actors.spec import Scope, ServerSpec
from supervisor.admin import bodies
from supervisor.admin.caller import body as _body
from supervisor.admin.caller import principal as _principal
from supervisor.admin.caller import raw_body as _raw_body
from supervisor.admin.caller import scope as _scope
from supervisor.admin.caller import tenant as _tenant
from supervisor.admin.hosted import HostedClosed, HostedSessions, TooManySessions
from supervisor.admin.inspection_handlers import InspectionHandlers
from supervisor.admin.openapi import document
from supervisor.admin.public_handlers import PublicHandlers
from supervisor.admin.remembered_handlers import RememberedHandlers
from supervisor.admin.replica_handlers import ReplicaHandlers
from supervisor.admin.sse import EventFeeds, StreamedCall
from supervisor.admin.surface_handlers import SurfaceHandlers
from supervisor.admin.traced import arrival, traced
from supervisor.admin.views import (
    Clock,
    approval_item,
    server_detail,
    server_summary,
    session_item,
    tool_list,
    unsupervised_summary,
)
from supervisor.calls.requests import RequestInFlight
from supervisor.calls.turns import Turn
from supervisor.cluster.heartbeats import replica_families
from supervisor.runtime.reload_plan import ReloadRefused
from supervisor.sessions.approvals import Approval
from supervisor.sessions.session import Session
from supervisor.settings.loader import ConfigError
from supervisor.web.errors import ApiError, forbidden, not_found
from supervisor.web.guard import Guard
from supervisor.web.listings import NOTHING, BridgeListing, SessionListing
from supervisor.web.roles import Action, authorize
from supervisor.web.routes import JSON, METRICS, SSE
from supervisor.web.scrubber import SecretScrubber

if TYPE_CHECKING:
    from supervisor.service import Supervisor

COMMAND_TIMEOUT_S = 5.0
STATUS_TIMEOUT_S = 1.0
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def json_response(
    data: Any, scrubber: SecretScrubber, status: int = 200, headers: Mapping[str, str] | None = None
) -> TrioResponse:
    """A JSON answer with the config's secret values masked."""
    return TrioResponse(
        orjson.dumps(scrubber.scrub(data)), status=status, headers=dict(headers or {}), content_type=JSON
    )


def empty(status: int, headers: Mapping[str, str] | None = None) -> TrioResponse:
    """A bodiless answer (204, or a 202 that needs none)."""
    return TrioResponse(b"", status=status, headers=dict(headers or {}))


def stream_response(
    body: AsyncGenerator[bytes, None], headers: Mapping[str, str] | None = None
) -> TrioResponse:
    """A text/event-stream answer; no response timeout, the stream ends by itself."""
    response = TrioResponse(
        TrioIterableBody(body), status=200, headers={**SSE_HEADERS, **(headers or {})}, content_type=SSE
    )
    response.timeout = None
    return response


# A call body nested deeper than orjson reads is pruned below this depth (in a worker
# thread: a pathological 1 MiB body takes a fraction of a second) rather than refused,
# so that its arguments get the call's own ``invalid_arguments`` envelope and audit row.
CALL_PRUNE_DEPTH = JSON_MAX_DEPTH - 24


async def _call_body(raw: bytes) -> dict[str, Any]:
    try:
        return bodies.parse_object(raw)
    except bodies.MalformedJson:
        return await trio.to_thread.run_sync(
            functools.partial(bodies.parse_object, raw, prune_depth=CALL_PRUNE_DEPTH)
        )


def _wants_stream() -> bool:
    """An explicit ``text/event-stream`` in Accept (``*/*`` is not a request to stream)."""
    return any(value.lower() == SSE and quality > 0 for value, quality in request.accept_mimetypes)


def new_request_id() -> str:
    """A request id for a call whose client chose none."""
    return f"req-{secrets.token_hex(8)}"


class AdminApi(PublicHandlers, RememberedHandlers, ReplicaHandlers, SurfaceHandlers, InspectionHandlers):
    """The handlers, bound to one supervisor and its hosted sessions (the surface's
    beyond tools: ``surface_handlers.py``), and what the apps mounted beside the admin
    API let it list (``web/listings.py``)."""

    def __init__(
        self,
        supervisor: Supervisor,
        hosted: HostedSessions,
        feeds: EventFeeds,
        guard: Guard,
        redactor: Redactor,
        *,
        gateway: SessionListing = NOTHING,
        bridge: BridgeListing = NOTHING,
    ) -> None:
        self.supervisor = supervisor
        self.hosted = hosted
        self.feeds = feeds
        self.guard = guard
        self.scrubber = guard.scrubber
        self.redactor = redactor
        self.gateway = gateway
        self.bridge = bridge
        self._config = guard.config
        self._document = orjson.dumps(document())
        self._in_flight: set[tuple[str, str]] = set()  # (tenant, request id)
        self._streamed: set[StreamedCall] = set()

    def notice_reload(self) -> None:
        """When a reload (by any way in) changed the config, its secrets are redacted
        from then on too (the guard has its tokens); one identity check per request."""
        config = self.guard.config
        if config is not self._config:
            self._config = config
            self.redactor = self.redactor.with_secrets(config.secrets)

    def _json(self, data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> TrioResponse:
        return json_response(data, self.scrubber, status, headers)

    def _epoch(self) -> int:
        return self.supervisor.router.cell.current.epoch

    # ------------------------------------------------------------------ service

    async def health(self) -> TrioResponse:
        # degraded: audit rows wait in memory for the disk (supervisor.store.journal), or
        # in the journal for a database that refuses them (the folder says so:
        # supervisor.store.folding), or the store went away; how many is in the metrics,
        # which are the operator's. ``store`` names the database, never its credentials.
        store, journal = self.supervisor.store.store, self.supervisor.journal
        degraded = journal.degraded or journal.waiting > 0 or store.unavailable
        return self._json(
            {
                "status": "degraded" if degraded else "ok",
                "servers": len(self.supervisor.config.servers),
                "epoch": self._epoch(),
                "store": store.name,
            }
        )

    async def metrics(self) -> TrioResponse:
        sup = self.supervisor
        text = sup.metrics.render(
            sup.servers(),
            self._epoch(),
            len(sup.approvals.pending()),
            audit_rows_pending=sup.journal.pending,
            audit_rows_dropped=sup.journal.dropped,
            extra=[*self.gateway.families(), *self.bridge.families(), *replica_families(sup.heartbeats)],
        )
        return TrioResponse(text, status=200, content_type=METRICS)

    async def openapi(self) -> TrioResponse:
        return TrioResponse(self._document, status=200, content_type=JSON)

    async def events(self) -> TrioResponse:
        if self.feeds.closed:
            raise ApiError(503, "unavailable", "the admin API is shutting down")
        if request.method == "HEAD":
            return TrioResponse(b"", status=200, headers=SSE_HEADERS, content_type=SSE)
        return stream_response(self.feeds.stream(_scope(), self._epoch, self.scrubber.scrub))

    # ------------------------------------------------------------------ servers

    def _session_scoped(self, name: str) -> ServerSpec | None:
        for spec in self.supervisor.config.servers:
            if spec.name == name and spec.scope is Scope.SESSION:
                return spec
        return None

    async def list_servers(self) -> TrioResponse:
        clock = Clock.read()
        views = self.supervisor.catalog_for(_scope()).servers  # a tenant counts the tools it sees
        servers = [server_summary(view, clock, self.redactor) for view in views.values()]
        servers += [
            unsupervised_summary(spec)
            for spec in self.supervisor.config.servers
            if spec.scope is Scope.SESSION
        ]
        return self._json({"servers": servers})

    async def get_server(self, name: str) -> TrioResponse:
        view = self.supervisor.catalog_for(_scope()).servers.get(name)
        if view is None:
            spec = self._session_scoped(name)
            if spec is None:
                raise not_found(f"server named {name!r}")
            detail = unsupervised_summary(spec)
            detail.update(transitions=[], problems=[], stderr_tail=None, in_flight=None, transport=None)
            return self._json(detail)
        status = await self.supervisor.connection_status(name, STATUS_TIMEOUT_S)
        view = self.supervisor.catalog_for(_scope()).servers.get(name, view)  # the freshest, after the wait
        detail = server_detail(view, status, Clock.read(), self.redactor)
        if (people := self.supervisor.people.people(name)) is not None:
            detail["people"] = people  # counts only, for a tenant too: never whose
        return self._json(detail)

    async def _command(self, name: str, control: Control) -> TrioResponse:
        if name in self.supervisor.people.specs:
            person = request.args.get("person")
            if control is not Control.RESTART or not person:
                why = "each person's connection is their own: restart one with ?person=<person>"
                raise ApiError(409, "conflict", f"server {name!r} is per_user: {why}")
            self.supervisor.people.restart(name, person)  # not running: their next call starts it
            return self._json({"server": name, "command": control.value}, 202)
        if name not in self.supervisor.servers():
            if self._session_scoped(name) is not None:
                raise ApiError(
                    409, "conflict", f"server {name!r} is session-scoped: each session runs its own"
                )
            raise not_found(f"server named {name!r}")
        with trio.move_on_after(COMMAND_TIMEOUT_S):
            await self.supervisor.command(name, control)
            return self._json({"server": name, "command": control.value}, 202)
        raise ApiError(503, "unavailable", f"server {name!r} is not taking commands right now; try again")

    async def reload_config(self) -> TrioResponse:
        try:
            plan = await self.supervisor.reload(trigger="api")
        except ConfigError as exc:
            raise ApiError(422, "config_error", str(exc)) from None
        except ReloadRefused as exc:
            raise ApiError(409, exc.code, str(exc), extra={"key": exc.key}) from None
        return self._json({"config": self.supervisor.config.source, **plan.report()})

    async def restart_server(self, name: str) -> TrioResponse:
        return await self._command(name, Control.RESTART)

    async def enable_server(self, name: str) -> TrioResponse:
        return await self._command(name, Control.ENABLE)

    async def disable_server(self, name: str) -> TrioResponse:
        return await self._command(name, Control.DISABLE)

    async def list_tools(self) -> TrioResponse:
        full = bodies.flag(request.args, "full")
        if full and not authorize(_principal(), Action.FULL_DESCRIPTIONS):
            raise forbidden(_principal(), Action.FULL_DESCRIPTIONS, "list_tools with full=1")
        catalog = self.supervisor.catalog_for(_scope())  # a tenant's view: its exposure lists
        return self._json({"epoch": catalog.epoch, "tools": tool_list(catalog, full=full)})

    # ----------------------------------------------------------------- sessions

    def _session(self, sid: str) -> Session:
        session = self.hosted.get(sid, _tenant())
        if session is None:
            raise not_found(f"session {sid!r}")
        return session

    async def list_sessions(self) -> TrioResponse:
        return self._json({"sessions": [session_item(s) for s in self.hosted.listing(_scope())]})

    async def create_session(self) -> TrioResponse:
        body = await _body(optional=True)
        host_tools = bodies.natural(body, "host_tools", 0)
        pinned = bodies.strings(body, "pinned")
        try:
            who = _principal()
            session = await self.hosted.create(
                who.tenant, host_tools=host_tools, pinned=pinned, person=who.person
            )
        except HostedClosed:
            raise ApiError(503, "unavailable", "the admin API is shutting down") from None
        except TooManySessions as exc:
            raise ApiError(429, "too_many_requests", str(exc)) from None
        return self._json({"session_id": session.id}, 201)

    async def delete_session(self, sid: str) -> TrioResponse:
        if not await self.hosted.close(sid, _scope()):
            raise not_found(f"session {sid!r}")
        return empty(204)

    async def begin_turn(self, sid: str) -> TrioResponse:
        session = self._session(sid)
        turn = await session.begin_turn()
        self.hosted.add_turn(session, turn)
        return self._json(
            {
                "turn_id": turn.id,
                "epoch": turn.epoch,
                "tools": turn.listing(),
                "search_enabled": turn.search_enabled,
            },
            201,
        )

    def _turn(self, sid: str, tid: str) -> Turn:
        self._session(sid)
        turn = self.hosted.get_turn(sid, tid, _tenant())
        if turn is None:
            raise not_found(f"turn {tid!r} in session {sid!r} (only the last turns are kept)")
        return turn

    async def call_tool(self, sid: str, tid: str) -> TrioResponse:
        turn = self._turn(sid, tid)
        raw = await _raw_body()
        body = await _call_body(raw)
        tool = bodies.string(body, "tool")
        assert tool is not None
        arguments = bodies.arguments(body)
        rid = bodies.request_id(body) or new_request_id()
        headers = {"X-Request-Id": rid}
        requests = self.supervisor.requests
        conflict = ApiError(409, "conflict", f"request id {rid!r} is already in flight")
        if _wants_stream():
            try:  # claim-and-release: refuse a taken id before the 200 of the stream is sent
                requests.open(rid, _tenant(), tool)
            except RequestInFlight:
                raise conflict from None
            requests.close(rid, _tenant())
            tenant = _tenant()
            call = StreamedCall(turn, tool, arguments, rid, lambda: requests.cancel(rid, tenant), raw)
            call.arrival = arrival()
            try:
                self.hosted.start_background(self._run_streamed, call)
            except HostedClosed:
                raise ApiError(503, "unavailable", "the admin API is shutting down") from None
            return stream_response(call.stream(self.scrubber.scrub), headers)
        key = (_tenant(), rid)
        self._in_flight.add(key)
        try:
            envelope = await traced(
                "tools/call", tool, arrival(), turn.call(tool, arguments, request_id=rid, raw_request=raw)
            )
        except RequestInFlight:
            raise conflict from None
        finally:
            self._in_flight.discard(key)
        return self._json(envelope.as_dict(), 200, headers)

    async def _run_streamed(self, call: StreamedCall) -> None:
        key = (call.turn.session.tenant, call.request_id)
        self._in_flight.add(key)
        self._streamed.add(call)
        try:
            await call.run()
        finally:
            self._in_flight.discard(key)
            self._streamed.discard(call)

    # ----------------------------------------------------------------- shutdown

    def cancel_calls(self) -> None:
        """Shutdown, after the grace period: end every call made over HTTP with an
        answer — pending approvals of our sessions are denied, calls in flight are
        cancelled (the server is told) — so each client still gets its envelope
        (and a stream its ``result`` and ``done``) before the drain deadline."""
        desk = self.supervisor.approvals
        for pending in desk.pending():
            if self.hosted.holds(pending.session):
                desk.answer(pending.id, None, Approval("deny"))
        for tenant, rid in list(self._in_flight):
            self.supervisor.requests.cancel(rid, tenant)

    def cut_streams(self) -> None:
        """Last resort before the deadline: stop streamed calls that ignored the
        cancellation; their streams still end with a ``cancelled`` result and ``done``."""
        for call in list(self._streamed):
            call.scope.cancel()

    async def tool_search(self, sid: str) -> TrioResponse:
        session = self._session(sid)
        body = await _body()
        query = bodies.string(body, "query")
        assert query is not None
        turn = self.hosted.latest_turn(sid, _tenant())
        if turn is None:
            turn = await session.begin_turn()
            self.hosted.add_turn(session, turn)
        return self._json({"turn_id": turn.id, **turn.search(query)})

    # ------------------------------------------------------ approvals, requests

    async def list_approvals(self) -> TrioResponse:
        pending = self.supervisor.approvals.pending(_scope())
        return self._json({"approvals": [approval_item(item) for item in pending]})

    async def answer_approval(self, approval_id: str) -> TrioResponse:
        body = await _body()
        decision = bodies.choice(body, "decision", ("allow", "deny"), None)
        remember = bodies.choice(body, "remember", ("once", "session", "always"), "once")
        if not self.supervisor.approvals.answer(approval_id, _scope(), Approval(decision, remember)):
            raise not_found(f"pending approval {approval_id!r}")
        return empty(204)

    async def cancel_request(self, rid: str) -> TrioResponse:
        if not self.supervisor.requests.cancel(rid, _tenant()):
            raise not_found(f"request {rid!r} in flight")
        return self._json({"request_id": rid, "status": "cancelling"}, 202)

    # ------------------------------------------------------ the apps beside it

    async def list_gateway_sessions(self) -> TrioResponse:
        return self._json({"sessions": self.gateway.session_items(_scope())})

    async def list_bridge_sessions(self) -> TrioResponse:
        return self._json({"sessions": self.bridge.session_items(_scope())})

    async def list_bridge_peers(self) -> TrioResponse:
        return self._json({"peers": self.bridge.peer_items()})
