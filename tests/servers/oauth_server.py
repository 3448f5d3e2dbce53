"""A loopback OAuth 2.1 authorization server in front of our fault server (raw ASGI).

Run it inside a test's nursery (``tests/servers`` on ``sys.path``, as for the fault server)::

    server = await nursery.start(serve_oauth_server, OAuthOptions(dcr_auth_method="client_secret_basic"))
    ... ServerSpec(type="remote", url=server.mcp_url) ...

One listener serves both roles. The protected resource is ``/mcp`` (and ``/messages`` for a
legacy inner server): a `FaultServer`, reached only with ``Authorization: Bearer <token>``;
otherwise 401 with a ``WWW-Authenticate`` challenge naming the protected resource metadata
(RFC 9728) at ``prm_path``. The authorization server (issuer = base + ``as_prefix``) has
RFC 8414 metadata, dynamic client registration (RFC 7591), ``/authorize`` (PKCE S256 only,
answers at once with a 302, no login page) and ``/token`` (authorization_code,
refresh_token, client_credentials). ``/authorize`` learns who signs in from a ``user`` query
parameter (the test's "browser" adds it, standing in for a login page); every grant keeps
that user, and ``mcp_users`` records whose token each MCP request carried, so a test proves
at the server whose identity a call used. Everything asked of it is recorded for the tests, and
faults are on request: rotating refresh tokens, tokens good for N requests, a 401 for
everything, a tampered ``state``, a 403 ``insufficient_scope`` for one tool.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import itertools
import json
import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit

import attrs
import trio
from http_fault_server import FaultOptions, FaultServer, Receive, Scope, Send, _h, _read_body, serve_loopback
from hypercorn.config import Config

AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"]
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
GRANT_TYPES = ("authorization_code", "refresh_token", "client_credentials")
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


@attrs.define
class OAuthOptions:
    """What the servers do; the defaults make a well-behaved AS with DCR for public clients."""

    mcp: FaultOptions = attrs.Factory(FaultOptions)  # the protected server's behaviour
    scopes_supported: list[str] | None = attrs.Factory(lambda: ["mcp:read", "mcp:write"])  # None: omitted
    challenge_scope: str | None = None  # scope="..." in the 401's WWW-Authenticate
    prm_in_header: bool = True  # resource_metadata="..." in WWW-Authenticate
    prm_path: str = "/.well-known/oauth-protected-resource/mcp"
    prm_resource: str | None = None  # the PRM "resource" (default: the exact /mcp URL)
    as_prefix: str = ""  # issuer = base + as_prefix
    dcr: bool = True  # offer dynamic client registration
    dcr_auth_method: str = "none"  # given to registered clients: one of AUTH_METHODS
    preregistered: dict[str, str] = attrs.Factory(dict)  # client_id -> secret ("" = public)
    grant_types: list[str] = attrs.Factory(lambda: list(GRANT_TYPES))
    access_ttl_s: int = 3600  # expires_in; also enforced (trio clock)
    issue_refresh: bool = True
    rotate_refresh: bool = True  # a refresh gives a new refresh token and the old one fails
    token_delay_s: float = 0.0  # the token endpoint answers this late (so requests overlap)
    valid_requests: int | None = None  # an access token is good for this many MCP requests
    reject_all: bool = False  # every MCP request gets 401, whatever the token
    tamper_state: bool = False  # /authorize redirects back with a wrong state
    insufficient_scope_for: str | None = None  # tools/call of this tool: 403 unless scope mcp:write
    # token exchange (RFC 8693, when TOKEN_EXCHANGE is in grant_types): the person a
    # subject_token stands for (as an identity provider's token would), None: refused
    exchange_subject: Callable[[str], str | None] | None = None


@attrs.define
class _Client:
    id: str
    secret: str  # "" for a public client
    method: str  # token_endpoint_auth_method; "" = preregistered confidential (basic or post)
    redirect_uris: list[str] | None  # None: any loopback http URL (preregistered)


@attrs.define
class _Grant:
    """What a code, a refresh token or an access token stands for."""

    client_id: str
    scope: str
    resource: str | None
    redirect_uri: str = ""
    challenge: str = ""
    expires_at: float = float("inf")
    uses: int = 0
    user: str | None = None  # who signed in at /authorize (its ``user`` parameter)


class OAuthError(Exception):
    """An OAuth error answer: status and JSON body ``{"error": ..., "error_description": ...}``."""

    def __init__(self, status: int, error: str, description: str = "") -> None:
        super().__init__(f"{status} {error}: {description}")
        self.status, self.error, self.description = status, error, description


class OAuthServer:
    """The ASGI app (authorization server + protected resource) and what it recorded."""

    def __init__(self, options: OAuthOptions) -> None:
        self.options = options
        self.mcp = FaultServer(options.mcp)
        self.base = ""  # set once it listens
        self.token_requests: list[dict[str, str]] = []
        self.exchanged: list[str] = []  # whom each accepted token exchange stood for
        self.registrations: list[dict[str, Any]] = []
        self.authorize_requests: list[dict[str, str]] = []
        self.metadata_requests: list[str] = []
        self.mcp_statuses: list[int] = []
        self.mcp_users: list[str | None] = []  # whose token each authorized MCP request carried
        self.refreshes: list[str | None] = []  # whose refresh token each good refresh used
        self._clients = {cid: _Client(cid, secret, "" if secret else "none", None)
                         for cid, secret in options.preregistered.items()}  # fmt: skip
        self._codes: dict[str, _Grant] = {}
        self._refresh: dict[str, _Grant] = {}
        self._access: dict[str, _Grant] = {}
        self._ids = itertools.count(1)

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def issuer(self) -> str:
        return f"{self.base}{self.options.as_prefix}"

    @property
    def prm_url(self) -> str:
        return f"{self.base}{self.options.prm_path}"

    def revoke_all(self) -> None:
        """Every access token issued so far stops working; refresh tokens stay good."""
        self._access.clear()

    def valid_access_tokens(self) -> list[str]:
        return [token for token, grant in self._access.items() if self._usable(grant)]

    def _usable(self, grant: _Grant) -> bool:
        limit = self.options.valid_requests
        return trio.current_time() < grant.expires_at and (limit is None or grant.uses < limit)

    # -------------------------------------------------------------------- ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        path, method, prefix = scope["path"], scope["method"], self.options.as_prefix
        if path in ("/mcp", "/messages"):
            return await self._protected(scope, receive, send)
        if path.startswith("/.well-known/"):
            if method != "GET":
                return await _json(send, 405, {"error": "method_not_allowed"})
            self.metadata_requests.append(path)
            if path == self.options.prm_path:
                return await _json(send, 200, self._prm())
            if path == f"/.well-known/oauth-authorization-server{prefix}":
                return await _json(send, 200, self._as_metadata())
            return await _json(send, 404, {"error": "not_found"})
        routes = {f"{prefix}/authorize": ("GET", self._authorize), f"{prefix}/token": ("POST", self._token)}
        if self.options.dcr:
            routes[f"{prefix}/register"] = ("POST", self._register)
        if path not in routes:
            return await _json(send, 404, {"error": "not_found"})
        if method != routes[path][0]:
            return await _json(send, 405, {"error": "method_not_allowed"})
        await routes[path][1](scope, receive, send)

    # ------------------------------------------------------- protected resource

    async def _protected(self, scope: Scope, receive: Receive, send: Send) -> None:
        index = len(self.mcp_statuses)
        self.mcp_statuses.append(200)
        headers = _headers(scope)
        scheme, _, token = headers.get("authorization", "").partition(" ")
        grant = self._access.get(token.strip()) if scheme.lower() == "bearer" else None
        if self.options.reject_all or grant is None or not self._usable(grant):
            self.mcp_statuses[index] = 401
            challenge = {"www-authenticate": self._challenge("invalid_token", self.options.challenge_scope)}
            return await _json(send, 401, {"error": "invalid_token"}, challenge)
        grant.uses += 1
        self.mcp_users.append(grant.user)
        tool = self.options.insufficient_scope_for
        if tool is not None and scope["method"] == "POST":
            body = await _read_body(receive)
            if _called_tool(body) == tool and "mcp:write" not in grant.scope.split():
                self.mcp_statuses[index] = 403
                challenge = {"www-authenticate": self._challenge("insufficient_scope", "mcp:write")}
                return await _json(send, 403, {"error": "insufficient_scope"}, challenge)
            receive = _replay(body, receive)

        async def watched_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.mcp_statuses[index] = message["status"]
            await send(message)

        await self.mcp(scope, receive, watched_send)

    def _challenge(self, error: str, scope: str | None) -> str:
        parts = [f'Bearer error="{error}"']
        if self.options.prm_in_header:
            parts.append(f'resource_metadata="{self.prm_url}"')
        if scope is not None:
            parts.append(f'scope="{scope}"')
        return ", ".join(parts)

    # ------------------------------------------------------------------ metadata

    def _prm(self) -> dict[str, Any]:
        prm: dict[str, Any] = {
            "resource": self.options.prm_resource or self.mcp_url,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
        }
        if self.options.scopes_supported is not None:
            prm["scopes_supported"] = self.options.scopes_supported
        return prm

    def _as_metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "response_types_supported": ["code"],
            "grant_types_supported": self.options.grant_types,
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": AUTH_METHODS,
        }
        if self.options.dcr:
            meta["registration_endpoint"] = f"{self.issuer}/register"
        if self.options.scopes_supported is not None:
            meta["scopes_supported"] = self.options.scopes_supported
        return meta

    # ---------------------------------------------------------------- endpoints

    async def _register(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body = json.loads(await _read_body(receive))
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return await _json(send, 400, {"error": "invalid_client_metadata"})
        self.registrations.append(body)
        uris = body.get("redirect_uris")
        exchange_only = body.get("grant_types") == [TOKEN_EXCHANGE] and uris == []  # no browser: no redirect
        if not exchange_only and (not uris or not isinstance(uris, list)):
            return await _json(send, 400, {"error": "invalid_redirect_uri"})
        method = self.options.dcr_auth_method
        client = _Client(f"client-{next(self._ids)}", "" if method == "none" else secrets.token_urlsafe(16),
                         method, [str(u) for u in uris])  # fmt: skip
        self._clients[client.id] = client
        grant_types = body.get("grant_types") or ["authorization_code", "refresh_token"]
        answer = {**body, "client_id": client.id, "token_endpoint_auth_method": method,
                  "redirect_uris": client.redirect_uris, "grant_types": grant_types}  # fmt: skip
        if client.secret:
            answer |= {"client_secret": client.secret, "client_secret_expires_at": 0}
        await _json(send, 201, answer)

    async def _authorize(self, scope: Scope, receive: Receive, send: Send) -> None:
        query = dict(parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True))
        self.authorize_requests.append(query)
        client = self._clients.get(query.get("client_id", ""))
        redirect_uri = query.get("redirect_uri", "")
        try:
            if query.get("response_type") != "code":
                raise OAuthError(400, "unsupported_response_type", "response_type must be code")
            if client is None:
                raise OAuthError(400, "invalid_client", "unknown client_id")
            if client.redirect_uris is not None and redirect_uri not in client.redirect_uris:
                raise OAuthError(400, "invalid_request", "redirect_uri is not registered")
            if client.redirect_uris is None and not _loopback(redirect_uri):
                raise OAuthError(400, "invalid_request", "redirect_uri must be a loopback http URL")
            if not query.get("code_challenge") or query.get("code_challenge_method") != "S256":
                raise OAuthError(400, "invalid_request", "PKCE with S256 is required")
        except OAuthError as e:
            return await _json(send, e.status, {"error": e.error, "error_description": e.description})
        assert client is not None
        code = f"code-{secrets.token_urlsafe(16)}"
        self._codes[code] = _Grant(client.id, query.get("scope", ""), query.get("resource"), redirect_uri,
                                   query["code_challenge"], user=query.get("user"))  # fmt: skip
        back = {"code": code}
        if "state" in query or self.options.tamper_state:
            tampered = f"tampered-{secrets.token_hex(4)}"
            back["state"] = tampered if self.options.tamper_state else query["state"]
        location = f"{redirect_uri}{'&' if '?' in redirect_uri else '?'}{urlencode(back)}"
        await _json(send, 302, {}, {"location": location})

    async def _token(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        form = dict(parse_qsl((await _read_body(receive)).decode(), keep_blank_values=True))
        record = dict(form)
        if "authorization" in headers:
            record["authorization"] = headers["authorization"]
        self.token_requests.append(record)
        await trio.sleep(self.options.token_delay_s)
        nostore = {"cache-control": "no-store", "pragma": "no-cache"}
        try:
            if not headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
                raise OAuthError(400, "invalid_request", "the body must be form-urlencoded")
            client = self._authenticate(headers.get("authorization"), form)
            answer = self._grant(client, form)
        except OAuthError as e:
            extra = nostore | ({"www-authenticate": 'Basic realm="test"'}
                               if e.status == 401 and "authorization" in headers else {})  # fmt: skip
            return await _json(send, e.status, {"error": e.error, "error_description": e.description}, extra)
        await _json(send, 200, answer, nostore)

    def _authenticate(self, authorization: str | None, form: dict[str, str]) -> _Client:
        """The client the request authenticates as, by that client's own method."""
        basic: tuple[str, str] | None = None
        if authorization is not None:
            scheme, _, credentials = authorization.partition(" ")
            try:
                decoded = base64.b64decode(credentials.strip(), validate=True).decode()
            except ValueError:
                decoded = ""
            client_id, colon, secret = decoded.partition(":")
            if scheme.lower() != "basic" or not colon:
                raise OAuthError(401, "invalid_client", "unreadable Authorization header")
            basic = (unquote_plus(client_id), unquote_plus(secret))
        client_id = basic[0] if basic else form.get("client_id", "")
        client = self._clients.get(client_id)
        if client is None or (basic and "client_id" in form and form["client_id"] != client_id):
            raise OAuthError(401, "invalid_client", "unknown client")
        posted = form.get("client_secret")
        if client.method == "none":
            ok = basic is None and not posted
        elif basic is not None:
            ok = client.method in ("", "client_secret_basic") and posted is None and basic[1] == client.secret
        else:
            ok = client.method in ("", "client_secret_post") and posted == client.secret
        if not ok:
            raise OAuthError(401, "invalid_client", f"authentication failed ({client.method or 'secret'})")
        return client

    def _grant(self, client: _Client, form: dict[str, str]) -> dict[str, Any]:
        grant_type = form.get("grant_type", "")
        if grant_type not in self.options.grant_types:
            raise OAuthError(400, "unsupported_grant_type", grant_type)
        refresh = self.options.issue_refresh
        if grant_type == "authorization_code":
            code = self._codes.pop(form.get("code", ""), None)  # single use, even when it fails
            if code is None or code.client_id != client.id:
                raise OAuthError(400, "invalid_grant", "unknown, used or foreign code")
            if form.get("redirect_uri") != code.redirect_uri:
                raise OAuthError(400, "invalid_grant", "redirect_uri differs from the authorization request")
            if _s256(form.get("code_verifier", "")) != code.challenge:
                raise OAuthError(400, "invalid_grant", "PKCE verification failed")
            grant = _Grant(client.id, code.scope, code.resource, user=code.user)
        elif grant_type == "refresh_token":
            old = self._refresh.get(form.get("refresh_token", ""))
            if old is None or old.client_id != client.id:
                raise OAuthError(400, "invalid_grant", "unknown, rotated or foreign refresh token")
            asked = form.get("scope")
            if asked and not set(asked.split()) <= set(old.scope.split()):
                raise OAuthError(400, "invalid_scope", "more scope than first granted")
            grant = _Grant(client.id, asked or old.scope, old.resource, user=old.user)
            self.refreshes.append(old.user)
            if self.options.rotate_refresh:
                del self._refresh[form["refresh_token"]]
            else:
                refresh = False  # the old refresh token stays good; none is sent
        elif grant_type == "client_credentials":
            if not client.secret:
                raise OAuthError(400, "unauthorized_client", "client_credentials needs a confidential client")
            grant, refresh = _Grant(client.id, form.get("scope", ""), form.get("resource")), False
        elif grant_type == TOKEN_EXCHANGE:
            subject = self.options.exchange_subject
            person = subject(form.get("subject_token", "")) if subject is not None else None
            if person is None:
                raise OAuthError(400, "invalid_grant", "the subject_token is not one this server accepts")
            grant = _Grant(client.id, form.get("scope", ""), form.get("resource"), user=person)
            self.exchanged.append(person)
        else:
            raise OAuthError(400, "unsupported_grant_type", grant_type)
        access = f"at-{secrets.token_urlsafe(16)}"
        ttl = self.options.access_ttl_s
        self._access[access] = attrs.evolve(grant, expires_at=trio.current_time() + ttl)
        answer: dict[str, Any] = {"access_token": access, "token_type": "Bearer", "expires_in": ttl,
                                  "scope": grant.scope}  # fmt: skip
        if refresh:
            answer["refresh_token"] = f"rt-{secrets.token_urlsafe(16)}"
            self._refresh[answer["refresh_token"]] = grant
        return answer


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _loopback(uri: str) -> bool:
    try:
        parts = urlsplit(uri)
        return parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS
    except ValueError:
        return False


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _called_tool(body: bytes) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, dict) and message.get("method") == "tools/call":
        name = (message.get("params") or {}).get("name")
        return name if isinstance(name, str) else None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that first gives back the body already read, then reads on."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return replayed


async def _json(send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": _h({"content-type": "application/json", **(headers or {})})})  # fmt: skip
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def serve_oauth_server(
    options: OAuthOptions | None = None,
    *,
    configure: Callable[[Config], None] | None = None,
    task_status: trio.TaskStatus[OAuthServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve on 127.0.0.1 (port 0) until cancelled; reports the server once it listens.
    ``configure``: as for ``serve_loopback`` (TLS, for mutual-TLS tests)."""
    server = OAuthServer(options or OAuthOptions())
    async with trio.open_nursery() as nursery:
        server.base = await nursery.start(functools.partial(serve_loopback, server, configure=configure))
        server.mcp.url = server.mcp_url
        task_status.started(server)
