"""The console's audit page (``GET /ui/audit``): the search form and one page of rows.

Rendered on the server from ``GET /v1/audit``'s answer, newest first, every value
through ``html.escape``. A row's details (its hash, sizes, who cancelled it, the
replica, whatever else the API gives) sit in a ``<details>`` element, which opens with
no script; the page loads none. A trace id becomes a link only through
``console.trace_url`` (checked at load: http or https, the id URL-quoted into it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from html import escape
from typing import Any

from supervisor.console.audit_query import older_link
from supervisor.console.page import escaped, page_head
from supervisor.console.sessions import ConsoleSession
from supervisor.settings.console import ConsoleSettings

COLUMNS = (
    ("at", "at (UTC)"), ("tenant", "tenant"), ("person", "person"), ("server", "server"),
    ("tool", "tool"), ("outcome", "outcome"), ("duration_ms", "duration"),
)  # fmt: skip
"""The row's columns: (the API's field, the heading)."""
DETAILS = (
    "outcome", "duration_ms", "decision", "session", "call_id", "args_sha256", "args_bytes",
    "result_bytes", "error", "cancelled_by", "replica", "trace_id",
)  # fmt: skip
"""The details' order; fields the API adds later follow, by name."""
INPUTS = (
    ("since", "since (UTC)", "datetime-local"), ("until", "until (UTC)", "datetime-local"),
    ("tenant", "tenant", "text"), ("person", "person", "text"), ("server", "server", "text"),
    ("tool", "tool", "text"), ("outcome", "outcome", "text"),
)  # fmt: skip


def readable_time(at: Any) -> str:
    """Unix seconds as ``2026-11-28 15:47:26.123`` (UTC); anything else as it came."""
    if isinstance(at, int | float) and not isinstance(at, bool):
        try:
            return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        except (OverflowError, OSError, ValueError):
            pass
    return str(at)


def _column(key: str, row: Mapping[str, Any]) -> str:
    value = row.get(key)
    if key == "at":
        return f'<td class="at">{escape(readable_time(value))}</td>'
    if key == "duration_ms" and value is not None:
        return f'<td class="duration">{escaped(value)} ms</td>'
    return f'<td class="{escape(key)}">{escaped(value)}</td>'


def _details(row: Mapping[str, Any]) -> str:
    keys = [*DETAILS, *sorted(k for k in row if k not in DETAILS and k not in dict(COLUMNS))]
    items = "".join(
        f'<dt>{escape(key)}</dt><dd class="{escape(key)}">{escaped(row[key])}</dd>'
        for key in keys
        if row.get(key) not in (None, "")
    )
    return f"<details><summary>details</summary><dl>{items}</dl></details>"


def audit_row(row: Mapping[str, Any], console: ConsoleSettings, with_call: bool) -> str:
    """One audit row: its columns, the call id (when the page has any), its trace link
    (when it has a trace and the config a ``trace_url``), its details."""
    cells = "".join(_column(key, row) for key, _ in COLUMNS)
    if with_call:
        cells += f'<td class="call">{escaped(row.get("call_id"))}</td>'
    link = console.trace_link(row.get("trace_id") if isinstance(row.get("trace_id"), str) else None)
    trace = f'<a class="trace" href="{escape(link)}" rel="noopener noreferrer">trace</a>' if link else ""
    return f'<tr class="audit-row">{cells}<td>{trace}</td><td>{_details(row)}</td></tr>'


def search_form(form: Mapping[str, str]) -> str:
    """The search, filled with what was asked (a new search starts at the newest row)."""
    fields = "".join(
        f'<label>{escape(label)} <input type="{kind}" name="{name}"'
        + (' step="1"' if kind == "datetime-local" else "")  # seconds too
        + f' value="{escape(form.get(name, ""))}"></label>'
        for name, label, kind in INPUTS
    )
    limit = f'<input type="hidden" name="limit" value="{escape(form["limit"])}">' if "limit" in form else ""
    return (
        f'<form id="audit-search" method="get" action="/ui/audit">{fields}{limit}'
        '<button type="submit">Search</button></form>'
    )


def refusal(status: int, json_of: Callable[[], Any]) -> str:
    """The API's refusal of a search as the page says it: its status and its message."""
    try:
        error = (json_of() or {}).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    message = error.get("message") if isinstance(error, dict) else str(error)
    return f"the audit search was refused ({status}): {message or 'the API gave no reason'}"


def audit_page(
    session: ConsoleSession,
    form: Mapping[str, str],
    found: Mapping[str, Any] | None,
    problem: str | None,
    console: ConsoleSettings,
) -> str:
    """The page: who is signed in, the way back, the search, and the rows the API gave
    (``found``) or why it gave none (``problem``, as text)."""
    rows: list[Mapping[str, Any]] = [r for r in (found or {}).get("rows", []) if isinstance(r, Mapping)]
    with_call = any(row.get("call_id") for row in rows)
    heads = "".join(f"<th>{escape(label)}</th>" for _, label in COLUMNS)
    heads += "<th>call</th>" if with_call else ""
    if problem is not None:
        result = f'<p class="problem" role="alert">{escape(problem)}</p>'
    elif not rows:
        result = '<p class="empty">No audit rows match.</p>'
    else:
        body = "".join(audit_row(row, console, with_call) for row in rows)
        result = f'<table id="audit"><thead><tr>{heads}<th></th><th></th></tr></thead><tbody>{body}</tbody>'
        result += "</table>"
    cursor = (found or {}).get("cursor")
    older = (
        f'<p><a id="older" href="{escape(older_link(form, cursor))}">older</a></p>'
        if problem is None and isinstance(cursor, str)
        else ""
    )
    return (
        page_head("mcp-supervisor: audit", script=False)
        + '<header><h1>mcp-supervisor</h1><nav><a id="nav-console" href="/ui">Console</a></nav>'
        + f'<span class="who">{escape(session.tenant)} ({escape(session.role)})</span></header>'
        + '<main class="audit"><h2>Audit</h2>'
        + search_form(form)
        + result
        + older
        + "</main></body></html>"
    )
