"""The admin API's handlers of what a console inspects: the calls in flight by their
server-assigned ids and a cancel by that id (``supervisor/calls/in_flight.py``), the
audit search (``supervisor/store/audit_search.py``), and a server's latency ring
(``supervisor/runtime/latency_ring.py``). ``AdminApi`` inherits them.

An operator may cancel any tenant's call by its call id (a tenant only its own; the
request ids clients choose stay per tenant: ``POST /v1/requests/{rid}/cancel``), so a
hung call can be ended from the console; the call's audit row says who cancelled it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import trio
from quart import request
from quart_trio.wrappers import TrioResponse

from supervisor.admin.caller import principal
from supervisor.cluster.heartbeats import STORE_ERRORS
from supervisor.runtime.latency_ring import SLOT_S
from supervisor.store.audit_search import MAX_PAGE, AuditQuery
from supervisor.store.records import AuditRow
from supervisor.web.errors import ApiError, not_found

if TYPE_CHECKING:
    from supervisor.service import Supervisor

READ_TIMEOUT_S = 5.0
_EQUAL = ("person", "server", "tool", "outcome")
N = TypeVar("N", int, float)


class _Api(Protocol):
    supervisor: Supervisor

    def _json(
        self, data: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> TrioResponse: ...


class InspectionHandlers:
    """``/v1/calls``, ``/v1/calls/{call_id}/cancel``, ``/v1/audit`` and
    ``/v1/servers/{name}/latency`` (mixed into ``AdminApi``)."""

    async def list_calls(self: _Api) -> TrioResponse:
        now = trio.current_time()
        calls = self.supervisor.calls.in_flight.listed(principal().scope)
        items = [
            {"call_id": c.id, "age_s": round(now - c.started, 3), "server": c.server, "tool": c.tool,
             "tenant": c.tenant, "session": c.session, "person": c.person}
            for c in calls
        ]  # fmt: skip
        return self._json({"calls": items})

    async def cancel_call(self: _Api, call_id: str) -> TrioResponse:
        who = principal()
        by = f"{who.role.value} {who.tenant}" + (f" ({who.person})" if who.person else "")
        if not self.supervisor.calls.in_flight.cancel(call_id, who.scope, by):
            raise not_found(f"call {call_id!r} in flight")
        return self._json({"call_id": call_id, "status": "cancelling"}, 202)

    async def search_audit(self: _Api) -> TrioResponse:
        query = _audit_query(principal().scope, principal().tenant)
        with trio.move_on_after(READ_TIMEOUT_S):
            try:
                page = await self.supervisor.store.read(lambda store: store.search_audit(query))
            except STORE_ERRORS as exc:
                raise ApiError(503, "store_unavailable", f"cannot read the audit rows: {exc}") from None
            cursor = None if page.cursor is None else f"{page.cursor[0]!r}:{page.cursor[1]}"
            return self._json({"rows": [_row(row) for row in page.rows], "cursor": cursor})
        raise ApiError(503, "store_unavailable", f"the store did not answer within {READ_TIMEOUT_S:g} s")

    async def server_latency(self: _Api, name: str) -> TrioResponse:
        if name not in self.supervisor.catalog_for(principal().scope).servers:
            raise not_found(f"server named {name!r}")
        buckets = [
            {"start": b.start, "count": b.count, "p50_ms": b.p50_ms, "p99_ms": b.p99_ms}
            for b in self.supervisor.calls.latency.buckets(name)
        ]
        return self._json({"server": name, "bucket_s": SLOT_S, "buckets": buckets})


def _audit_query(scope: str | None, own: str) -> AuditQuery:
    """The search a request's query string asks for; 400 naming the bad parameter."""
    args = request.args
    tenant = args.get("tenant") or None
    if scope is not None:
        if tenant not in (None, scope):
            raise ApiError(
                400,
                "bad_request",
                f"tenant={tenant!r}: this token sees tenant {own!r}'s rows only; drop tenant=",
            )
        tenant = scope
    limit = _number(args.get("limit"), "limit", int)
    if limit is not None and not 1 <= limit <= MAX_PAGE:
        raise ApiError(400, "bad_request", f"limit={limit}: ask for 1 to {MAX_PAGE} rows a page")
    return AuditQuery(
        since=_number(args.get("since"), "since", float),
        until=_number(args.get("until"), "until", float),
        tenant=tenant,
        after=_cursor(args.get("cursor")),
        limit=100 if limit is None else limit,
        **{name: args.get(name) or None for name in _EQUAL},
    )


def _number(text: str | None, name: str, kind: type[N]) -> N | None:
    if not text:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise ApiError(
            400, "bad_request", f"{name}={text!r} is not a number; give unix seconds or a count"
        ) from None
    if not math.isfinite(value):
        raise ApiError(400, "bad_request", f"{name}={text!r} is not a finite number")
    return value


def _cursor(text: str | None) -> tuple[float, int] | None:
    if not text:
        return None
    at, _, row_id = text.partition(":")
    try:
        found = (float(at), int(row_id))
    except ValueError:
        raise ApiError(
            400, "bad_request", f"cursor={text!r} is not one this API gave: pass a page's cursor as is"
        ) from None
    if not math.isfinite(found[0]):
        raise ApiError(
            400, "bad_request", f"cursor={text!r} is not one this API gave: pass a page's cursor as is"
        )
    return found


def _row(row: AuditRow) -> dict[str, Any]:
    return {
        "at": row.at, "tenant": row.tenant, "person": row.person, "session": row.session,
        "server": row.server, "tool": row.tool, "decision": row.decision, "outcome": row.outcome,
        "duration_ms": row.duration_ms,
        "args_sha256": row.args_sha256, "args_bytes": row.args_bytes, "result_bytes": row.result_bytes,
        "trace_id": row.trace_id, "replica": row.replica,
        "cancelled_by": row.cancelled_by,
    }  # fmt: skip
