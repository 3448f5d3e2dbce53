"""``GET /ui/servers/<name>``: one server's page, from ``GET /v1/servers/{name}``, its
``/latency`` and ``GET /v1/tools``, each asked in process with the session's token.

What the API says is shown as it says it: state, phase, condition, since when, the
retry countdown, the last error and its age, the stderr tail, the transitions (as a
timeline and a table) and the restarts among them, era, tools. Every value passes
``html.escape``; the plots are ``plots.py``'s SVG. Ages and countdowns carry their
seconds in ``data-age`` and ``data-countdown``, which ``console.js`` ticks on locally
(no request), and it follows the server's ``state`` events on the page.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import quote

import attrs

from actors.protocol.era import Era
from supervisor.console.ages import clock_text, countdown, ticking_age
from supervisor.console.inprocess import Asgi, call
from supervisor.console.page import page_head
from supervisor.console.plots import latency_plot, state_timeline
from supervisor.console.sessions import ConsoleSession

ENDED = frozenset({"backoff", "teardown"})
"""A transition into these ended a connection: a restart (the next ``resolve`` starts
it again)."""


@attrs.frozen
class Rendered:
    """A page and its status; 401 and 403 mean the API refused the session's token."""

    status: int
    html: str


async def server_answer(api: Asgi, scope: Mapping[str, Any], session: ConsoleSession, name: str) -> Rendered:
    """The page of server ``name`` as the session's token may see it."""
    host = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"host"), "127.0.0.1")

    async def get(path: str) -> tuple[int, Any]:
        answer = await call(api, "GET", path, host=host, token=session.token, client=scope.get("client"))
        return answer.status, answer.json()

    quoted = quote(name, safe="")
    if not name or "/" in name:
        return Rendered(404, missing_page(session, name))
    status, detail = await get(f"/v1/servers/{quoted}")
    if status in (401, 403):
        return Rendered(status, "")
    if status == 404:
        return Rendered(404, missing_page(session, name))
    if status != 200:
        why = ((detail or {}).get("error") or {}).get("message", "no answer")
        return Rendered(status, problem_page(session, name, f"the API answered {status}: {why}"))
    latency_status, latency = await get(f"/v1/servers/{quoted}/latency")
    tools_status, tools = await get("/v1/tools")
    listed = (
        [t for t in (tools or {}).get("tools", []) if t.get("server") == name] if tools_status == 200 else []
    )
    return Rendered(
        200, server_page(session, detail, latency if latency_status == 200 else None, listed, time.time())
    )


def _page_top(session: ConsoleSession, title: str) -> str:
    return (
        page_head(title, script=True)
        + '<header><h1><a href="/ui">mcp-supervisor</a></h1>'
        + f'<span class="who">{escape(session.tenant)} ({escape(session.role)})</span>'
        + '<form id="logout" method="post" action="/ui/logout"><button type="submit">Sign out</button></form>'
        + f'</header><main data-csrf="{escape(session.csrf)}">'
        + '<p><a href="/ui">← all servers</a></p>'
    )


_BOTTOM = '<p id="status" role="status"></p></main></body></html>'


def missing_page(session: ConsoleSession, name: str) -> str:
    """404: the name, and where the servers this token may see are listed."""
    return problem_page(session, name, f"no server named {name!r} that this token may see")


def problem_page(session: ConsoleSession, name: str, problem: str) -> str:
    return (
        _page_top(session, f"mcp-supervisor: {name}")
        + f'<p class="problem" role="alert">{escape(problem)}: see the list of servers.</p>'
        + _BOTTOM
    )


def escaped(value: Any) -> str:
    return "" if value is None else escape(str(value))


def _moment(unix: float | None, now: float) -> str:
    if unix is None:
        return ""
    return f"<time>{escape(clock_text(unix))}</time> ({ticking_age(max(0.0, now - unix))})"


def era_text(version: str | None) -> str:
    if not version:
        return ""
    era = Era.of_version(version)
    return f"{version} ({'handshake' if era is Era.HANDSHAKE else era.value} era)"


def _facts(detail: Mapping[str, Any], now: float) -> str:
    error = ""
    if detail.get("last_error"):
        error = f'<span class="error">{escaped(detail["last_error"])}</span> ' + (
            f"({ticking_age(detail.get('last_error_age_s'))})"
            if detail.get("last_error_age_s") is not None
            else ""
        )
    rows = (
        ("state", "state", escaped(detail.get("state"))),
        ("phase", "phase", escaped(detail.get("phase"))),
        ("condition", "condition", escaped(detail.get("condition"))),
        ("since", "since", _moment(detail.get("since"), now)),
        ("retry in", "retry", countdown(detail.get("retry_in_s"))),
        ("attempt", "attempt", escaped(detail.get("attempt"))),
        ("last error", "last-error", error),
        ("protocol", "era", escape(era_text(detail.get("protocol_version")))),
        ("tools", "tools", escaped(detail.get("tools"))),
        ("reconnects", "reconnects", escaped(detail.get("reconnects"))),
        ("transport", "transport", escaped(detail.get("transport"))),
        ("calls in flight", "in-flight", escaped(detail.get("in_flight"))),
    )
    return (
        '<dl class="facts">' + "".join(f'<dt>{t}</dt><dd class="{c}">{v}</dd>' for t, c, v in rows) + "</dl>"
    )


def transition_row(transition: Mapping[str, Any], now: float) -> str:
    return (
        f"<tr><td>{_moment(transition.get('at'), now)}</td><td>{escaped(transition.get('previous'))}</td>"
        f"<td>{escaped(transition.get('state'))}</td><td>{escaped(transition.get('phase'))}</td>"
        f'<td class="why">{escaped(transition.get("reason"))}</td></tr>'
    )


def _table(ident: str, heads: Sequence[str], rows: str) -> str:
    head = "".join(f"<th>{h}</th>" for h in heads)
    return f'<table id="{ident}"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _history(detail: Mapping[str, Any], now: float) -> str:
    transitions = list(detail.get("transitions") or [])
    restarts = [t for t in transitions if t.get("state") in ENDED]
    return (
        "<section><h2>States</h2>"
        + state_timeline(transitions, now)
        + _table(
            "transitions",
            ("when", "from", "to", "phase", "why"),
            "".join(transition_row(t, now) for t in transitions),
        )
        + "</section><section><h2>Restarts</h2>"
        + f"<p>Each end of the connection among the last {len(transitions)} transitions the API keeps "
        + "(the reconnects since the supervisor started: above).</p>"
        + _table(
            "restarts",
            ("when", "from", "to", "phase", "why"),
            "".join(transition_row(t, now) for t in restarts),
        )
        + "</section>"
    )


def _stderr(tail: Sequence[str] | None) -> str:
    if tail is None:
        shown = '<p class="note">No stderr tail: not a local server, or it did not answer in time.</p>'
    else:
        shown = f'<pre id="stderr">{escape(chr(10).join(tail))}</pre>'
    return f"<section><h2>Standard error (the last lines)</h2>{shown}</section>"


def _tools(tools: Sequence[Mapping[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{escaped(t.get('name'))}</td><td>{escaped(t.get('id'))}</td>"
        f'<td class="description">{escaped(t.get("description"))}</td></tr>'
        for t in tools
    )
    return "<section><h2>Tools</h2>" + _table("tools", ("name", "id", "description"), rows) + "</section>"


def _controls(detail: Mapping[str, Any], operator: bool) -> str:
    if not operator or detail.get("state") is None:
        return ""
    name = escape(str(detail.get("name", "")))
    return (
        '<p class="controls">'
        + "".join(
            f'<button type="button" data-act="{act}" data-arg="{name}">{act}</button>'
            for act in ("restart", "disable" if detail.get("enabled") else "enable")
        )
        + "</p>"
    )


def server_page(
    session: ConsoleSession,
    detail: Mapping[str, Any],
    latency: Mapping[str, Any] | None,
    tools: Sequence[Mapping[str, Any]],
    now: float,
) -> str:
    """The page of one server (``detail`` as ``GET /v1/servers/{name}`` answers)."""
    name = str(detail.get("name", ""))
    plot = (
        latency_plot(latency.get("buckets", []), latency.get("bucket_s", 10))
        if latency is not None
        else '<p class="note">This token may not read the latency.</p>'
    )
    problems = "".join(f"<li>{escaped(p)}</li>" for p in detail.get("problems") or [])
    return (
        _page_top(session, f"mcp-supervisor: {name}")
        + f'<section id="server" data-server="{escape(name)}" data-state="{escaped(detail.get("state"))}">'
        + f"<h2>{escape(name)}</h2>"
        + _controls(detail, session.role == "operator")
        + _facts(detail, now)
        + (f'<ul class="problems">{problems}</ul>' if problems else "")
        + "</section>"
        + f"<section><h2>Latency</h2>{plot}</section>"
        + _history(detail, now)
        + _stderr(detail.get("stderr_tail"))
        + _tools(tools)
        + _BOTTOM
    )
