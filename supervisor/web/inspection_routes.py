"""The route table's rows of what a console inspects (issue 36): the calls in flight by
their server-assigned ids, a cancel by that id, the audit search, and each server's
latency over the last 15 minutes. ``routes.py`` appends them to ``ROUTES``."""

from __future__ import annotations

from supervisor.web.roles import Action
from supervisor.web.route import Route

_BAD_SEARCH = (
    "A filter that is not a number where one is needed, a limit out of 1 to 500, a malformed "
    "cursor, or a tenant's tenant= naming another tenant."
)

INSPECTION_ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/v1/calls",
        "list_calls",
        "The calls in flight (those that may wait: an approval, their server), oldest first, each "
        "with its server-assigned call id, age, server, tool, tenant, session and person; a "
        "tenant's own, an operator's of every tenant.",
        response="CallList",
        action=Action.USE_SESSIONS,
    ),
    Route(
        "POST",
        "/v1/calls/{call_id}/cancel",
        "cancel_call",
        "Cancel a call in flight by its server-assigned call id (GET /v1/calls): the server is "
        "told, the caller gets 'cancelled', and the audit row names who cancelled it. A tenant "
        "cancels its own calls; an operator any tenant's.",
        status=202,
        response="CallCancelled",
        action=Action.USE_SESSIONS,
    ),
    Route(
        "GET",
        "/v1/audit",
        "search_audit",
        "The audit rows newest first, a page at a time: since and until (unix seconds, since <= "
        "at < until), person, server, tool, outcome, and tenant (an operator's filter; a tenant "
        "sees its own rows, and naming another tenant is refused with 400); limit 1 to 500 "
        "(default 100); cursor: the previous page's, to go on.",
        query=("since", "until", "tenant", "person", "server", "tool", "outcome", "cursor", "limit"),
        response="AuditPage",
        errors=(("400", _BAD_SEARCH),),
        action=Action.USE_SESSIONS,
    ),
    Route(
        "GET",
        "/v1/servers/{name}/latency",
        "server_latency",
        "One server's call latency over the last 15 minutes: 90 buckets of 10 s, oldest first, "
        "each with its start (unix seconds), call count, p50 and p99 (ms, null when empty; read "
        "from a histogram: the upper bound of the bucket the percentile falls in).",
        response="LatencySeries",
        action=Action.READ_STATE,
    ),
)
