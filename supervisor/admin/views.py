"""Pure shaping: catalog views, statuses, tools, approvals and progress as API JSON.

Times: the router stamps states on Trio's clock (monotonic, arbitrary origin); the
API speaks unix time, so each stamp is moved by ``now_unix - now_trio``, taken once
per answer (a ``Clock``). A server that never changed state has no ``since``.

Secrets: text that came from a server (stderr tail, last error, transition reasons)
runs through the full ``Redactor`` of the config's secrets, although the transport
redacted it already — a second pass costs little and covers a line cut in two.
Everything the API sends also passes ``SecretScrubber``, which masks the config's
exact secret values anywhere in the JSON (a tool that echoes its environment, an
argument that holds a token) without the Redactor's generic patterns, which would
mangle ordinary tool output such as ``"max_tokens": 5``.
"""

from __future__ import annotations

import time
from typing import Any

import attrs
import trio

from actors.connection.messages import ConnectionStatus
from actors.protocol.session import ProgressReceived
from actors.redaction import Redactor
from actors.router.catalog import Catalog, ServerView
from actors.spec import ServerSpec
from supervisor.sessions.approvals import ApprovalRequest
from supervisor.sessions.session import Session
from supervisor.store.records import person_field


@attrs.frozen(slots=True)
class Clock:
    """One reading of both clocks, to turn Trio timestamps into unix time."""

    trio_now: float
    unix_now: float

    @classmethod
    def read(cls) -> Clock:
        """Read both clocks now."""
        return cls(trio.current_time(), time.time())

    def unix(self, trio_time: float) -> float:
        """A Trio timestamp as unix time (three decimals)."""
        return round(self.unix_now - (self.trio_now - trio_time), 3)


def spec_fields(spec: ServerSpec) -> dict[str, Any]:
    """What the config says about a server."""
    return {
        "name": spec.name,
        "type": spec.type,
        "scope": spec.scope.value,
        "trusted": spec.trusted,
        "enabled": spec.enabled,
    }


def server_summary(view: ServerView, clock: Clock, redactor: Redactor) -> dict[str, Any]:
    """One shared server as listed by ``GET /v1/servers``."""
    retry_in = None
    next_retry = None
    if view.next_retry_at is not None:
        retry_in = round(max(0.0, view.next_retry_at - clock.trio_now), 3)
        next_retry = clock.unix(view.next_retry_at)
    # An error is kept after its server came back: its time says whether it is news.
    error_at = error_age = None
    if view.last_error is not None and view.last_error_at is not None:
        error_at = clock.unix(view.last_error_at)
        error_age = round(max(0.0, clock.trio_now - view.last_error_at), 3)
    return {
        **spec_fields(view.spec),
        "state": view.state.value,
        "since": clock.unix(view.since) if view.transitions else None,
        "attempt": view.attempt,
        "next_retry_at": next_retry,
        "retry_in_s": retry_in,
        "last_error": None if view.last_error is None else redactor.redact(view.last_error),
        "last_error_at": error_at,
        "last_error_age_s": error_age,
        "condition": view.condition,
        "phase": None if view.phase is None else view.phase.value,
        "protocol_version": view.protocol_version,
        "available": view.available,
        "reconnects": view.reconnects,
        "tools": len(view.entries),
        "stale": view.stale,
    }


def unsupervised_summary(spec: ServerSpec) -> dict[str, Any]:
    """A session-scoped server: configured, but each session runs its own copy."""
    return {
        **spec_fields(spec),
        "state": None,
        "since": None,
        "attempt": 0,
        "next_retry_at": None,
        "retry_in_s": None,
        "last_error": None,
        "last_error_at": None,
        "last_error_age_s": None,
        "condition": None,
        "phase": None,
        "protocol_version": None,
        "available": False,
        "reconnects": 0,
        "tools": 0,
        "stale": False,
    }


def server_detail(
    view: ServerView, status: ConnectionStatus | None, clock: Clock, redactor: Redactor
) -> dict[str, Any]:
    """``GET /v1/servers/{name}``: the summary plus history and the actor's own view."""
    detail = server_summary(view, clock, redactor)
    detail["transitions"] = [
        {
            "at": clock.unix(t.at),
            "state": t.state.value,
            "previous": t.previous.value,
            "reason": None if t.reason is None else redactor.redact(t.reason),
            "phase": None if t.phase is None else t.phase.value,
        }
        for t in view.transitions
    ]
    detail["problems"] = [redactor.redact(p) for p in view.problems]
    if status is None:  # the actor did not answer in time (busy, or being replaced)
        detail.update(stderr_tail=None, in_flight=None, transport=None)
    else:
        detail.update(
            stderr_tail=[redactor.redact(line) for line in status.stderr_tail],
            in_flight=status.in_flight,
            transport=status.transport,
        )
    return detail


def tool_list(catalog: Catalog, *, full: bool = False) -> list[dict[str, Any]]:
    """Every tool of a catalog, in config order, with its server's availability;
    descriptions of untrusted servers cut to their listing length unless ``full``."""
    tools = []
    for entry in catalog.listing:
        view = catalog.servers[entry.server]
        tools.append(
            {
                "id": entry.id,
                "server": entry.server,
                "name": entry.name,
                "description": entry.description if full else entry.listed_description or entry.description,
                **entry.schemas(),
                "available": view.available,
                "stale": view.cached_only,
            }
        )
    return tools


def approval_item(request: ApprovalRequest) -> dict[str, Any]:
    """A pending approval request as a client sees it."""
    return {
        "id": request.id,
        "tool": request.tool,
        "server": request.server,
        "permission": request.permission,
        "arguments": dict(request.arguments),
        "reason": request.reason,
        "session": request.session,
        "tenant": request.tenant,
        **person_field(request.person, request.tenant),
    }


def session_item(session: Session) -> dict[str, Any]:
    """An open session as ``GET /v1/sessions`` lists it."""
    return {
        "session_id": session.id,
        "tenant": session.tenant,
        "host_tools": session.host_tools,
        "pinned": list(session.pinned),
    }


def progress_item(request_id: str, note: ProgressReceived) -> dict[str, Any]:
    """One ``notifications/progress`` of a call, for its SSE stream."""
    return {
        "request_id": request_id,
        "progress": note.progress,
        "total": note.total,
        "message": note.message,
    }
