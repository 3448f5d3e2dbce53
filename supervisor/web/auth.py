"""Who may talk to the admin API, decided before any handler runs.

Three gates, in this order, as pure functions of the request line and headers (the
app calls ``check_request`` from a ``before_request`` hook; tests call it directly):

1. ``Host`` and the request target (DNS-rebinding guard). When the API is bound to
   loopback, a browser tricked into resolving ``evil.example`` to 127.0.0.1 still
   sends ``Host: evil.example``; only a loopback authority (``127.0.0.1``, any 127/8
   literal, ``localhost``, ``[::1]``, with any port) is served. Parsing is strict, so
   ``127.0.0.1.evil.example`` and ``127.0.0.1@evil.example`` are refused → 403.
   A request may also name its authority in the target itself (absolute form,
   ``GET http://evil.example/v1/servers``); HTTP/1.1 says that authority then
   *replaces* ``Host`` (RFC 9112 §3.2.2), and Quart routes such a request by its
   path alone. So an absolute-form target is served only when its authority passes
   the same loopback check (and ``Host`` still must): proxies and some clients send
   this form to loopback too, and refusing it would buy nothing the check does not.
   Any other form (``*``, ``host:port``) is a 400: none of our routes takes it.
2. ``Origin``. Absent is fine (native clients send none). Present, it must be a
   loopback ``http(s)://host[:port]``; ``Origin: null`` (a sandboxed or opaque browser
   context) is refused → 403. No CORS: this is not a browser API.
3. Bearer token → principal (a tenant in a role, see ``roles.py``). With tokens
   configured every route but the health check needs ``Authorization: Bearer
   <token>`` (401 with ``WWW-Authenticate: Bearer``); a bearer value with a control
   character or non-ASCII in it is a 400, like the NUL that Hypercorn refuses before
   we see it (``server/hypercorn_patches.py``). Tokens are compared in constant time against *every*
   configured token, so the time taken says nothing about which prefix matched.
   Without tokens a loopback client is the operator of tenant ``default``, and any
   other client is refused (``serve`` refuses a non-loopback bind without tokens;
   this covers an embedding that binds one anyway).

What the principal may then do is the role check's business (``roles.authorize``,
called by the app with the route's action), not this module's.

Nothing here logs, and ``TokenBook``'s repr never shows a token.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Mapping, Sequence

import attrs

from supervisor.settings.model import TokenGrant
from supervisor.settings.net import MAX_PORT, is_loopback_host
from supervisor.web.roles import LOOPBACK_OPERATOR, Principal

# host[:port]; a bracketed IPv6 literal or a plain name/IPv4 literal. No userinfo,
# no path, nothing after the port: anything else is not a Host we serve.
_AUTHORITY = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-]+)(?::(?P<port>[0-9]{1,5}))?\Z")
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#@\s]+)\Z", re.IGNORECASE)
_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +(?P<token>[\x21-\x7e]+) *\Z")
# "Bearer " and then something with a control character or non-ASCII in it: a broken
# header, not a wrong token (Hypercorn already refuses a NUL; an in-process client may not).
_MALFORMED_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] .*[^\x20-\x7e]", re.DOTALL)
# The absolute form of a request target: scheme://authority[/path]; no fragment.
_ABSOLUTE = re.compile(r"[Hh][Tt][Tt][Pp][Ss]?://(?P<authority>[^/?#]*)(?:/[^#]*)?\Z")


def authority_is_loopback(authority: str) -> bool:
    """Whether a ``Host`` header value (``host[:port]``) names this machine, strictly:
    parsed here (brackets hold an IPv6 address and nothing else, as in RFC 3986), then
    the project's one loopback check (``net.is_loopback_host``: a non-canonical number
    like ``127.1`` is not loopback)."""
    match = _AUTHORITY.match(authority)
    if match is None or (match["port"] is not None and int(match["port"]) > MAX_PORT):
        return False
    host = match["host"]
    if host.startswith("[") and not _ipv6_literal(host[1:-1]):
        return False
    return is_loopback_host(host)


def _ipv6_literal(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def origin_is_loopback(origin: str) -> bool:
    """Whether an ``Origin`` header value is a loopback web origin (``null`` is not)."""
    match = _ORIGIN.match(origin)
    return match is not None and authority_is_loopback(match["authority"])


class TokenBook:
    """Bearer tokens → principals, compared in constant time; repr shows only the count."""

    __slots__ = ("_entries",)

    def __init__(self, tokens: Mapping[str, TokenGrant]) -> None:
        self._entries = tuple(
            (token.encode(), Principal(grant.tenant, grant.role)) for token, grant in tokens.items()
        )

    @property
    def enabled(self) -> bool:
        """Whether any token is configured (then every non-public route needs one)."""
        return bool(self._entries)

    def principal_of(self, presented: str) -> Principal | None:
        """Who a presented token speaks for, or None. Every entry is compared, always."""
        candidate = presented.encode()
        found: Principal | None = None
        for token, principal in self._entries:
            if hmac.compare_digest(candidate, token):
                found = principal
        return found

    def __repr__(self) -> str:
        return f"TokenBook(<{len(self._entries)} tokens>)"


def target_authority(target: str) -> str | None:
    """The authority an absolute-form request target names, ``None`` for a path
    (origin form); ValueError for any other form."""
    if target.startswith("/"):
        return None
    match = _ABSOLUTE.match(target)
    if match is None:
        raise ValueError(target)
    return match["authority"]


@attrs.frozen(slots=True)
class Denial:
    """A request refused before it reaches a handler."""

    status: int
    code: str
    message: str
    headers: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen(slots=True)
class Presented:
    """A bearer token that is no static token, for sign-in to check (``signin.py``)."""

    token: str = attrs.field(repr=False)


@attrs.frozen(slots=True)
class Admitted:
    """A request that may proceed, as ``principal`` (None: anonymous, on a public route)."""

    principal: Principal | None


def check_request(
    *,
    public: bool,
    hosts: Sequence[str],
    origins: Sequence[str],
    authorizations: Sequence[str],
    tokens: TokenBook,
    bind_is_loopback: bool,
    target: str = "/",
    client_is_loopback: bool = False,
    signin: bool = False,
) -> Admitted | Presented | Denial:
    """Host and target, then Origin, then the bearer token (see the module docstring).
    ``target`` is the request target as sent (before any query string). With ``signin``
    on, a bearer token that is no static one is ``Presented`` for sign-in to check (on
    a non-public route), and a missing one is a 401 even without static tokens."""
    try:
        authority = target_authority(target)
    except ValueError:
        return Denial(400, "bad_request", "the request target must be a path such as /v1/servers")
    if bind_is_loopback and (len(hosts) != 1 or not authority_is_loopback(hosts[0])):
        return Denial(403, "forbidden", "the Host header must name a loopback address (DNS-rebinding guard)")
    if bind_is_loopback and authority is not None and not authority_is_loopback(authority):
        return Denial(
            403, "forbidden", "the request target must name a loopback address (DNS-rebinding guard)"
        )
    if origins and (len(origins) != 1 or not origin_is_loopback(origins[0])):
        return Denial(403, "forbidden", "cross-origin requests are refused (Origin must be loopback)")
    if not tokens.enabled and not signin:
        if bind_is_loopback or client_is_loopback:
            return Admitted(LOOPBACK_OPERATOR)
        return Denial(403, "forbidden", "no admin tokens are configured, so only loopback clients are served")
    if any(_MALFORMED_BEARER.match(value) for value in authorizations):
        problem = "the bearer token holds a character no token has (a control character or non-ASCII)"
        return Denial(400, "bad_request", problem)
    if len(authorizations) == 1:
        match = _BEARER.match(authorizations[0])
        if match is not None:
            principal = tokens.principal_of(match["token"])
            if principal is not None:
                return Admitted(principal)
            if public:
                return Admitted(None)
            if signin:
                return Presented(match["token"])
            return Denial(
                401,
                "unauthorized",
                "the bearer token is not valid",
                {"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
    if public:
        return Admitted(None)
    return Denial(
        401,
        "unauthorized",
        "this endpoint needs a bearer token: send 'Authorization: Bearer <token>'",
        {"WWW-Authenticate": "Bearer"},
    )
