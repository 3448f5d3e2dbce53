"""``/ui``: the console's ASGI app (see the package docstring).

Routes (``ROUTES``; the state-changing ones, ``ACTIONS``, drive the CSRF, Origin and
role tests as one table):

- ``GET /ui``: the page (signed out: a redirect to ``/ui/login``);
- ``GET /ui/servers/<name>``: one server's page (``server_page.py``);
- ``GET /ui/login`` and ``POST /ui/login`` (a form with the token), ``POST /ui/logout``;
- ``GET /ui/static/<file>``: our script and style sheet (no inline script anywhere: the
  Content-Security-Policy allows scripts from ``'self'`` only);
- ``GET /ui/audit``: the audit search (``audit_page.py``), ``GET /v1/audit`` in process;
- ``GET /ui/events``: ``/v1/events`` relayed with the session's token (no polling);
- ``GET /ui/fragments/<name>``: a read-only piece of the page for the script
  (``fragments.py``: a pending approval's arguments, which its event does not carry);
- ``POST /ui/act/<action>/...``: an action, carried out as the documented API request
  (``ACTIONS``), with the session's CSRF token in ``X-CSRF-Token`` and a same-origin
  ``Origin``; the API's answer (its status, its error) is the answer.

Every answer carries the security headers (``SECURITY_HEADERS``). A session whose
token the API refuses (a reload removed it) is ended there and then.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast
from urllib.parse import parse_qs, quote

import attrs
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope

from supervisor.console.audit_page import audit_page, refusal
from supervisor.console.audit_query import BadSearch, api_query, form_of
from supervisor.console.fragments import fragment
from supervisor.console.inprocess import ApiAnswer, Asgi, call, relayed_scope
from supervisor.console.page import login_page, main_page
from supervisor.console.server_page import server_answer
from supervisor.console.session_sections import session_sections
from supervisor.console.sessions import (
    ConsoleSession,
    ConsoleSessions,
    clear_cookie,
    cookie_of,
    csrf_matches,
    set_cookie,
)
from supervisor.web.guard import Guard
from supervisor.web.http import Headers
from supervisor.web.roles import Principal

UI = "/ui"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make a form's Origin "null"
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
STATIC = {"console.js": "text/javascript; charset=utf-8", "console.css": "text/css; charset=utf-8"}
MAX_FORM_BYTES = 16384
SESSION_LISTINGS = (
    ("admin API", "/v1/sessions"),
    ("gateway", "/v1/gateway/sessions"),
    ("bridge", "/v1/bridge/sessions"),
)
"""The sessions the page lists, by kind, and the documented listing of each."""


@attrs.frozen
class Action:
    """A state-changing console route and the API request it makes."""

    name: str
    method: str
    path: str
    """The API path, ``{arg}`` from the console path's last segment."""
    body: Mapping[str, Any] | None = None


ACTIONS: Mapping[str, Action] = {
    action.name: action
    for action in (
        Action("restart", "POST", "/v1/servers/{arg}/restart"),
        Action("enable", "POST", "/v1/servers/{arg}/enable"),
        Action("disable", "POST", "/v1/servers/{arg}/disable"),
        Action("allow-once", "POST", "/v1/approvals/{arg}", {"decision": "allow", "remember": "once"}),
        Action("allow-session", "POST", "/v1/approvals/{arg}", {"decision": "allow", "remember": "session"}),
        Action("allow-always", "POST", "/v1/approvals/{arg}", {"decision": "allow", "remember": "always"}),
        Action("deny", "POST", "/v1/approvals/{arg}", {"decision": "deny"}),
        Action("cancel", "POST", "/v1/calls/{arg}/cancel"),  # the operator may cancel any tenant's
    )
}
"""Every state-changing ``/ui`` route: ``POST /ui/act/<name>/<arg>``."""

Send = Callable[[Mapping[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[Mapping[str, Any]]]


class ConsoleApp:
    """The ASGI app of ``/ui`` and everything under it."""

    def __init__(self, api: Asgi, guard: Guard) -> None:
        self.api = api
        self.guard = guard
        self.sessions = ConsoleSessions()

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        await self._route(cast(Any, scope), cast(Any, receive), cast(Any, send))

    async def _route(self, scope: Mapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await _answer(send, 404, b"", "text/plain")
            return
        path, method = str(scope["path"]).rstrip("/") or "/", scope["method"]
        headers = Headers(scope["headers"])
        session = self.sessions.get(cookie_of(headers.get("Cookie")))
        if path == f"{UI}/login":
            await (self._login(scope, receive, send, headers) if method == "POST" else self._login_page(send))
        elif path.startswith(f"{UI}/static/") and method == "GET":
            await self._static(send, path.rsplit("/", 1)[-1])
        elif session is None:
            await _redirect(send, f"{UI}/login")
        elif path == UI and method == "GET":
            await self._page(scope, send, session)
        elif path == f"{UI}/audit" and method == "GET":
            await self._audit(scope, send, session)
        elif path.startswith(f"{UI}/servers/") and method == "GET":
            await self._server_page(scope, send, session, path.removeprefix(f"{UI}/servers/"))
        elif path == f"{UI}/events" and method == "GET":
            relayed = cast(Any, relayed_scope(scope, "/v1/events", session.token))
            await self.api(relayed, cast(Any, receive), cast(Any, _secured(send)))
        elif path == f"{UI}/logout" and method == "POST":
            await self._logout(send, headers, session)
        elif path.startswith(f"{UI}/fragments/") and method == "GET":
            await self._fragment(scope, send, headers, session, path.removeprefix(f"{UI}/fragments/"))
        elif path.startswith(f"{UI}/act/") and method == "POST":
            await self._act(scope, send, headers, session, path.removeprefix(f"{UI}/act/"))
        else:
            await _answer(send, 404, b"not found", "text/plain")

    # ------------------------------------------------------------------ sign-in

    async def _login_page(self, send: Send, problem: str | None = None, status: int = 200) -> None:
        await _answer(send, status, login_page(problem).encode(), "text/html; charset=utf-8")

    async def _login(self, scope: Mapping[str, Any], receive: Receive, send: Send, headers: Headers) -> None:
        if not self._same_origin(headers):
            await self._login_page(send, "this sign-in did not come from this page (Origin)", 403)
            return
        form = parse_qs((await _body(receive)).decode("utf-8", "replace"))
        token = (form.get("token") or [""])[0].strip() or None
        principal = await self._principal(scope, token)
        if principal is None:
            await self._login_page(send, "the API does not accept this token", 401)
            return
        session = self.sessions.open(token, principal.role.value, principal.tenant)
        secure = headers.get("X-Forwarded-Proto") == "https" or scope.get("scheme") == "https"
        await _redirect(send, UI, {"Set-Cookie": set_cookie(session, secure=secure)})

    async def _principal(self, scope: Mapping[str, Any], token: str | None) -> Principal | None:
        raw = [
            (k, v) for k, v in scope["headers"] if k.lower() not in (b"cookie", b"origin", b"authorization")
        ]
        if token is not None:
            raw.append((b"authorization", f"Bearer {token}".encode("latin-1")))
        verdict = await self.guard.verdict(Headers(raw), scope, "list_servers")
        return verdict if isinstance(verdict, Principal) else None

    async def _logout(self, send: Send, headers: Headers, session: ConsoleSession) -> None:
        if not self._same_origin(headers) or not csrf_matches(session, headers.get("X-CSRF-Token")):
            await _answer(send, 403, b"refused: sign out from the console's own page", "text/plain")
            return
        self.sessions.end(session.id)
        await _redirect(send, f"{UI}/login", {"Set-Cookie": clear_cookie()})

    # --------------------------------------------------------------------- page

    async def _page(self, scope: Mapping[str, Any], send: Send, session: ConsoleSession) -> None:
        host = Headers(scope["headers"]).get("Host") or "127.0.0.1"

        async def get(path: str) -> ApiAnswer:
            return await call(
                self.api, "GET", path, host=host, token=session.token, client=scope.get("client")
            )

        servers = await get("/v1/servers")
        if servers.status in (401, 403):
            await self._signed_out(send, session)
            return
        approvals = await get("/v1/approvals")
        sessions: dict[str, list[dict[str, Any]]] = {}
        for kind, path in SESSION_LISTINGS:
            listed = await get(path)
            sessions[kind] = (listed.json() or {}).get("sessions", []) if listed.status == 200 else []
        in_flight = await get("/v1/calls")
        calls = (in_flight.json() or {}).get("calls", []) if in_flight.status == 200 else []
        peers = await get("/v1/bridge/peers")
        more = session_sections(
            sessions["gateway"], (peers.json() or {}).get("peers", []) if peers.status == 200 else []
        )
        page = main_page(session, servers.json() or {}, approvals.json() or {}, sessions, calls, more)
        await _answer(send, 200, page.encode(), "text/html; charset=utf-8")

    async def _audit(self, scope: Mapping[str, Any], send: Send, session: ConsoleSession) -> None:
        """The audit search: ``GET /v1/audit`` with the session's token, the API's
        refusal (a 400) shown on the page as text."""
        form = form_of(scope.get("query_string", b""))
        found: Any = None
        try:
            query = api_query(form)
        except BadSearch as exc:
            problem: str | None = str(exc)
            status = 400
        else:
            host = Headers(scope["headers"]).get("Host") or "127.0.0.1"
            answer = await call(
                self.api, "GET", "/v1/audit", host=host, token=session.token,
                client=scope.get("client"), query=query,
            )  # fmt: skip
            if answer.status == 401:
                await self._signed_out(send, session)
                return
            status = answer.status
            found, problem = (answer.json(), None) if status == 200 else (None, refusal(status, answer.json))
        page = audit_page(session, form, found, problem, self.guard.config.console)
        await _answer(send, status, page.encode(), "text/html; charset=utf-8")

    async def _signed_out(self, send: Send, session: ConsoleSession) -> None:
        """The session's token is no longer accepted (a reload removed it): end it."""
        self.sessions.end(session.id)
        await _redirect(send, f"{UI}/login", {"Set-Cookie": clear_cookie()})

    async def _server_page(
        self, scope: Mapping[str, Any], send: Send, session: ConsoleSession, name: str
    ) -> None:
        rendered = await server_answer(self.api, scope, session, name)
        if rendered.status in (401, 403):  # its token is no longer accepted, as on the main page
            await self._signed_out(send, session)
            return
        await _answer(send, rendered.status, rendered.html.encode(), "text/html; charset=utf-8")

    async def _static(self, send: Send, name: str) -> None:
        if name not in STATIC:
            await _answer(send, 404, b"not found", "text/plain")
            return
        data = importlib.resources.files("supervisor.console").joinpath("static", name).read_bytes()
        await _answer(send, 200, data, STATIC[name])

    async def _fragment(
        self, scope: Mapping[str, Any], send: Send, headers: Headers, session: ConsoleSession, name: str
    ) -> None:
        host = headers.get("Host") or "127.0.0.1"
        status, body = await fragment(
            self.api, name, host=host, token=session.token, client=scope.get("client")
        )
        if status == 401:
            self.sessions.end(session.id)  # its token is no longer accepted
        await _answer(send, status, body, "application/json")

    # ------------------------------------------------------------------ actions

    async def _act(
        self, scope: Mapping[str, Any], send: Send, headers: Headers, session: ConsoleSession, rest: str
    ) -> None:
        name, _, arg = rest.partition("/")
        action = ACTIONS.get(name)
        if action is None or not arg or "/" in arg:
            await _answer(send, 404, b'{"error": "no such console action"}', "application/json")
            return
        if not self._same_origin(headers):
            await _answer(send, 403, b'{"error": "cross-origin request refused"}', "application/json")
            return
        if not csrf_matches(session, headers.get("X-CSRF-Token")):
            await _answer(
                send, 403, b'{"error": "missing or wrong CSRF token: reload the page"}', "application/json"
            )
            return
        path = action.path.format(arg=quote(arg, safe=""))
        host = headers.get("Host") or "127.0.0.1"
        answer = await call(
            self.api,
            action.method,
            path,
            host=host,
            token=session.token,
            client=scope.get("client"),
            body=action.body,
        )
        if answer.status == 401:
            self.sessions.end(session.id)
        await _answer(send, answer.status, answer.body or b"{}", "application/json")

    def _same_origin(self, headers: Headers) -> bool:
        """``Origin`` names this very host (``Host``, or the proxy's ``X-Forwarded-Host``)
        or one of ``console.allowed_origins``: a form or script of another site never
        acts for a signed-in browser."""
        origin = headers.get("Origin")
        host = headers.get("Host")
        if origin is None:
            return False
        if origin.lower() in self.guard.config.console.allowed_origins:
            return True  # listed: a proxy that does not pass the browser's host on
        scheme, _, authority = origin.partition("://")
        forwarded = headers.get("X-Forwarded-Host")
        return scheme in ("http", "https") and authority in {h for h in (host, forwarded) if h}


async def _body(receive: Receive) -> bytes:
    data = bytearray()
    while True:
        message = await receive()
        data += message.get("body", b"")
        if len(data) > MAX_FORM_BYTES:
            return b""
        if not message.get("more_body", False):
            return bytes(data)


def _secured(send: Send) -> Send:
    """``send`` with our security headers added to the answer's head."""

    async def secured(message: Mapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            extra = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return secured


async def _answer(
    send: Send, status: int, body: bytes, media: str, headers: Mapping[str, str] | None = None
) -> None:
    head = {"Content-Type": media, "Content-Length": str(len(body)), **SECURITY_HEADERS, **(headers or {})}
    encoded = [(k.lower().encode(), v.encode("latin-1")) for k, v in head.items()]
    await send({"type": "http.response.start", "status": status, "headers": encoded})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _redirect(send: Send, to: str, headers: Mapping[str, str] | None = None) -> None:
    await _answer(send, 303, b"", "text/plain", {"Location": to, **(headers or {})})
