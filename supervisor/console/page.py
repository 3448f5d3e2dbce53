"""The console's HTML, rendered on the server; every value from a server, a client or a
config passes ``html.escape`` (a tool description or an error text can never become
markup), and no page carries an inline script or style: ``console.js`` and
``console.css`` come from ``/ui/static`` (the Content-Security-Policy allows nothing
else)."""

from __future__ import annotations

import json
import time
from html import escape
from typing import Any
from urllib.parse import quote

from supervisor.console.ages import countdown, ticking_age
from supervisor.console.sessions import ConsoleSession

_HEAD = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8">'
    '<meta name="viewport" content="width=device-width, initial-scale=1">'
    "<title>{title}</title>"
    '<link rel="icon" href="data:,">'  # no favicon request (the page makes none it needs not)
    '<link rel="stylesheet" href="/ui/static/console.css">{script}</head><body>'
)


def page_head(title: str, script: bool) -> str:
    tag = '<script src="/ui/static/console.js" defer></script>' if script else ""
    return _HEAD.format(title=escape(title), script=tag)


def login_page(problem: str | None = None) -> str:
    """The sign-in form: a token the admin API accepts (empty on a loopback supervisor
    without tokens)."""
    note = f'<p class="problem" role="alert">{escape(problem)}</p>' if problem else ""
    return (
        page_head("mcp-supervisor: sign in", script=False)
        + '<main class="login"><h1>mcp-supervisor</h1>'
        + note
        + '<form method="post" action="/ui/login"><label>Token '
        + '<input type="password" name="token" autocomplete="off" autofocus></label>'
        + '<button type="submit">Sign in</button></form></main></body></html>'
    )


def escaped(value: Any) -> str:
    return "" if value is None else escape(str(value))


def _server_row(server: dict[str, Any], operator: bool) -> str:
    name = str(server.get("name", ""))
    controls = ""
    if operator and server.get("state") is not None:
        controls = "".join(
            f'<button type="button" data-act="{act}" data-arg="{escape(name)}">{act}</button>'
            for act in ("restart", ("disable" if server.get("enabled") else "enable"))
        )
    error = ""
    if server.get("last_error"):
        error = f'<span class="error">{escaped(server["last_error"])}</span>'
        if server.get("last_error_age_s") is not None:
            error += f" ({ticking_age(server['last_error_age_s'])})"
    since = None if server.get("since") is None else max(0.0, time.time() - server["since"])
    return (
        f'<tr data-server="{escape(name)}">'
        f'<td><a href="/ui/servers/{escape(quote(name, safe=""))}">{escape(name)}</a></td>'
        f'<td class="state">{escaped(server.get("state"))}</td>'
        f'<td class="phase">{escaped(server.get("phase"))}</td>'
        f'<td class="since">{ticking_age(since)}</td>'
        f'<td class="retry">{countdown(server.get("retry_in_s"))}</td>'
        f"<td>{escaped(server.get('protocol_version'))}</td>"
        f'<td>{escaped(server.get("tools"))}</td><td class="last-error">{error}</td><td>{controls}</td></tr>'
    )


def arguments_text(item: dict[str, Any]) -> str:
    """A pending approval's arguments as the page shows them (as the trust rule saw
    them), unescaped: the page escapes it, the live row sets it as text."""
    return json.dumps(item.get("arguments", {}), sort_keys=True)


def _approval_row(item: dict[str, Any]) -> str:
    ident = escape(str(item.get("id", "")))
    arguments = arguments_text(item)
    buttons = "".join(
        f'<button type="button" data-act="{act}" data-arg="{ident}">{label}</button>'
        for act, label in (
            ("allow-once", "allow once"),
            ("allow-session", "for the session"),
            ("allow-always", "always"),
            ("deny", "deny"),
        )
    )
    return (
        f'<tr data-approval="{ident}"><td>{escaped(item.get("tool"))}</td>'
        f"<td>{escaped(item.get('server'))}</td>"
        f"<td><code>{escape(arguments)}</code></td><td>{escaped(item.get('reason'))}</td>"
        f"<td>{escaped(item.get('tenant'))}</td><td>{buttons}</td></tr>"
    )


SESSION_COLUMNS = (
    ("session_id", "session"), ("tenant", "tenant"), ("era", "era"), ("protocol_version", "version"),
    ("client", "client"), ("age_s", "age s"), ("in_flight", "in flight"),
)  # fmt: skip
"""What the sessions table shows of each kind's listing (a missing field: empty)."""


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        value = " ".join(str(value.get(k, "")) for k in ("name", "version")).strip()
    return f"<td>{escaped(value)}</td>"


def sessions_table(kinds: dict[str, list[dict[str, Any]]]) -> str:
    """Every session the token may see, one row each, its kind first (admin API,
    gateway, bridge)."""
    head = "".join(f"<th>{escape(label)}</th>" for _, label in SESSION_COLUMNS)
    rows = "".join(
        f"<tr><td>{escape(kind)}</td>" + "".join(_cell(item.get(key)) for key, _ in SESSION_COLUMNS) + "</tr>"
        for kind, items in kinds.items()
        for item in items
    )
    return (
        '<section><h2>Sessions</h2><table id="sessions"><thead><tr><th>kind</th>'
        + head
        + f"</tr></thead><tbody>{rows}</tbody></table></section>"
    )


def calls_table(calls: list[dict[str, Any]]) -> str:
    """The calls in flight (``GET /v1/calls``), each with its age and a cancel button."""
    rows = "".join(
        f'<tr data-call="{escape(str(call.get("call_id", "")))}"><td>{escaped(call.get("call_id"))}</td>'
        f"<td>{escaped(call.get('server'))}</td><td>{escaped(call.get('tool'))}</td>"
        f"<td>{escaped(call.get('tenant'))}</td><td>{escaped(call.get('session'))}</td>"
        f"<td>{escaped(call.get('age_s'))}</td>"
        f'<td><button type="button" data-act="cancel" data-arg="{escape(str(call.get("call_id", "")))}">'
        "cancel</button></td></tr>"
        for call in calls
    )
    return (
        '<section><h2>Calls in flight</h2><table id="calls"><thead><tr><th>call</th><th>server</th>'
        "<th>tool</th><th>tenant</th><th>session</th><th>age s</th><th></th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )


def main_page(
    session: ConsoleSession,
    servers: dict[str, Any],
    approvals: dict[str, Any],
    sessions: dict[str, list[dict[str, Any]]] | None = None,
    calls: list[dict[str, Any]] | None = None,
    more: str = "",
) -> str:
    """The console: servers, pending approvals and sessions now; ``console.js`` keeps it live."""
    operator = session.role == "operator"
    rows = "".join(_server_row(s, operator) for s in servers.get("servers", []))
    asks = "".join(_approval_row(a) for a in approvals.get("approvals", []))
    return (
        page_head("mcp-supervisor", script=True)
        + '<header><h1>mcp-supervisor</h1><nav><a id="nav-audit" href="/ui/audit">Audit</a></nav>'
        + f'<span class="who">{escape(session.tenant)} '
        + f"({escape(session.role)})</span>"
        + '<form id="logout" method="post" action="/ui/logout">'
        + '<button type="submit">Sign out</button></form>'
        + f'</header><main data-csrf="{escape(session.csrf)}">'
        + '<section><h2>Servers</h2><table id="servers"><thead><tr>'
        + "<th>server</th><th>state</th><th>phase</th><th>since</th>"
        + "<th>retry in</th><th>era</th><th>tools</th><th>last error</th><th></th></tr></thead>"
        + f"<tbody>{rows}</tbody></table></section>"
        + '<section><h2>Approvals</h2><table id="approvals"><thead><tr><th>tool</th><th>server</th>'
        + "<th>arguments</th><th>reason</th><th>tenant</th><th></th></tr></thead>"
        + f"<tbody>{asks}</tbody></table></section>"
        + calls_table(calls or [])
        + sessions_table(sessions or {})
        + more  # further sections, rendered (escaped) by their own modules
        + '<p id="status" role="status"></p></main></body></html>'
    )
