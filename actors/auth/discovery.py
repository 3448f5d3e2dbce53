"""OAuth discovery for MCP servers, as pure functions (no I/O, no Trio).

What the MCP authorization spec (2025-06-18 and later, with the 2025-03-26 fallbacks)
asks a client to work out before it can get a token:

- the ``WWW-Authenticate: Bearer ...`` challenge of a 401/403: ``resource_metadata``,
  ``scope``, ``error`` (:func:`parse_challenge`);
- where the protected-resource metadata (RFC 9728) may be: the challenge's URL, then the
  path-aware well-known URL, then the root one (:func:`resource_metadata_urls`);
- where the authorization server's metadata (RFC 8414 / OpenID Connect discovery) may be,
  in the spec's order (:func:`server_metadata_urls`);
- whether the metadata's ``resource`` may be used for this server URL
  (:func:`resource_allowed`; a mismatch stops the flow: tokens must not go elsewhere);
- which scope to ask for (:func:`select_scope`);
- for servers of the 2025-03-26 revision without protected-resource metadata: the
  authorization base URL and the default endpoints (:func:`legacy_endpoints`).

The transport-facing code (``provider.py``) does the HTTP and calls these.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs

from actors.redaction import safe_url

OFFLINE_ACCESS = "offline_access"

# auth-param = token BWS "=" BWS ( token / quoted-string ), RFC 9110 §11.2.
_PARAM = re.compile(
    r"""\s*([!#$%&'*+\-.^_`|~0-9A-Za-z]+)\s*=\s*("(?:[^"\\]|\\.)*"|[!#$%&'*+\-.^_`|~0-9A-Za-z/:]+)\s*,?"""
)
# a quoted-string (stepped over) or the start of a Bearer or DPoP challenge
_SCHEME = re.compile(r'"(?:[^"\\]|\\.)*"|(?:^|,)\s*(?:Bearer|DPoP)(?=\s|$|,)', re.IGNORECASE)


class DiscoveryError(Exception):
    """The server's or authorization server's metadata cannot be used; the text says why."""


@attrs.frozen
class Challenge:
    """A ``Bearer`` challenge from ``WWW-Authenticate``."""

    params: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def resource_metadata(self) -> str | None:
        return self.params.get("resource_metadata")

    @property
    def scope(self) -> str | None:
        scope = self.params.get("scope")
        return scope if scope and scope.strip() else None

    @property
    def error(self) -> str | None:
        return self.params.get("error")

    @property
    def insufficient_scope(self) -> bool:
        return self.error == "insufficient_scope"


def parse_challenge(header: str | None) -> Challenge | None:
    """The ``Bearer`` challenge in a ``WWW-Authenticate`` value, or None. A ``DPoP``
    challenge (RFC 9449 §7.1) counts too; when both are there, their parameters are
    merged (the first one given wins).

    Other schemes in the same header (``Basic realm=...``) are skipped; values may be
    quoted (with backslash escapes) or bare tokens.
    """
    if not header:
        return None
    # each "Bearer" / "DPoP" that starts a challenge; quoted strings are stepped over, so
    # a realm="..., Bearer ..." of another scheme is not taken for one
    matches = [m for m in _SCHEME.finditer(header) if m.group(0)[:1] != '"']
    if not matches:
        return None
    params: dict[str, str] = {}
    for match in matches:
        rest = header[match.end() :]
        position = 0
        while position < len(rest):
            found = _PARAM.match(rest, position)
            if found is None:
                break  # the next scheme, or garbage: stop at what was understood
            name, value = found.group(1).lower(), found.group(2)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            params.setdefault(name, value)
            position = found.end()
            # a following "Scheme param=..." starts a new challenge
            if re.match(r"\s*[A-Za-z][\w-]*\s+[\w-]+\s*=", rest[position:]):
                break
    return Challenge(params)


def _origin(url: str) -> tuple[str, str, str]:
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. "http://[x": a server's bad URL is a discovery failure
        raise DiscoveryError(f"not a usable URL: {safe_url(url)}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise DiscoveryError(f"not an http(s) URL: {safe_url(url)}")
    return parts.scheme, parts.netloc, parts.path.rstrip("/")


def resource_metadata_urls(server_url: str, challenge: Challenge | None) -> list[str]:
    """Where to look for the protected-resource metadata, in order (RFC 9728 §3.1)."""
    scheme, netloc, path = _origin(server_url)
    urls: list[str] = []
    if challenge is not None and challenge.resource_metadata:
        hinted = challenge.resource_metadata
        _origin(hinted)  # must be http(s)
        urls.append(hinted)
    if path:
        urls.append(urlunsplit((scheme, netloc, f"/.well-known/oauth-protected-resource{path}", "", "")))
    urls.append(urlunsplit((scheme, netloc, "/.well-known/oauth-protected-resource", "", "")))
    return list(dict.fromkeys(urls))


def server_metadata_urls(issuer: str) -> list[str]:
    """Where to look for the authorization server's metadata, in the spec's order.

    With a path (``https://as.example/tenant1``): RFC 8414 path insertion, OpenID
    Connect path insertion, then OpenID Connect path appending. Without one: RFC 8414,
    then OpenID Connect.
    """
    scheme, netloc, path = _origin(issuer)

    def at(p: str) -> str:
        return urlunsplit((scheme, netloc, p, "", ""))

    if path:
        return [
            at(f"/.well-known/oauth-authorization-server{path}"),
            at(f"/.well-known/openid-configuration{path}"),
            at(f"{path}/.well-known/openid-configuration"),
        ]
    return [at("/.well-known/oauth-authorization-server"), at("/.well-known/openid-configuration")]


def canonical_resource(url: str) -> str:
    """The server's resource identifier (RFC 8707): scheme and host lower case, no
    fragment; the path kept (a trailing slash dropped)."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/") if parts.path != "/" else ""
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def resource_allowed(server_url: str, resource: str) -> bool:
    """May a token for ``resource`` be sent to ``server_url``? Same origin, and the
    resource's path is the server's path or a parent of it (RFC 9728 §3.3, as the
    reference SDKs read it)."""
    server = urlsplit(canonical_resource(server_url))
    claimed = urlsplit(canonical_resource(resource))
    if (server.scheme, server.netloc) != (claimed.scheme, claimed.netloc):
        return False
    base = claimed.path.rstrip("/")
    return server.path == base or server.path.startswith(base + "/") or not base


def legacy_endpoints(server_url: str) -> dict[str, str]:
    """2025-03-26 servers without metadata: the endpoints at the server's origin."""
    scheme, netloc, _ = _origin(server_url)
    base = urlunsplit((scheme, netloc, "", "", ""))
    return {
        "issuer": base,
        "authorization_endpoint": f"{base}/authorize",
        "token_endpoint": f"{base}/token",
        "registration_endpoint": f"{base}/register",
    }


def legacy_metadata_url(server_url: str) -> str:
    """2025-03-26: the authorization server is the server's origin."""
    scheme, netloc, _ = _origin(server_url)
    return urlunsplit((scheme, netloc, "/.well-known/oauth-authorization-server", "", ""))


@attrs.frozen
class ResourceMetadata:
    """The fields of RFC 9728 metadata we use."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None

    @classmethod
    def parse(cls, body: Any, where: str) -> ResourceMetadata:
        if not isinstance(body, Mapping):
            raise DiscoveryError(f"protected-resource metadata at {safe_url(where)} is not a JSON object")
        resource = body.get("resource")
        servers = body.get("authorization_servers")
        if not isinstance(resource, str) or not resource:
            raise DiscoveryError(f"protected-resource metadata at {safe_url(where)} has no resource")
        if not isinstance(servers, list) or not servers or not all(isinstance(s, str) for s in servers):
            raise DiscoveryError(
                f"protected-resource metadata at {safe_url(where)} names no authorization_servers"
            )
        return cls(resource, tuple(servers), _strings(body.get("scopes_supported")))


@attrs.frozen
class ServerMetadata:
    """The fields of RFC 8414 metadata we use."""

    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str
    registration_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    grant_types_supported: tuple[str, ...] | None = None
    code_challenge_methods_supported: tuple[str, ...] | None = None
    token_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    client_id_metadata_document_supported: bool = False
    dpop_signing_alg_values_supported: tuple[str, ...] | None = None  # RFC 9449 §5.1

    @classmethod
    def parse(cls, body: Any, where: str) -> ServerMetadata:
        if not isinstance(body, Mapping):
            raise DiscoveryError(f"authorization server metadata at {safe_url(where)} is not a JSON object")
        token = body.get("token_endpoint")
        if not isinstance(token, str) or not token:
            raise DiscoveryError(f"authorization server metadata at {safe_url(where)} has no token_endpoint")
        for key in ("token_endpoint", "authorization_endpoint", "registration_endpoint"):
            value = body.get(key)
            if isinstance(value, str):
                _origin(value)
        issuer = body.get("issuer")
        return cls(
            issuer=issuer if isinstance(issuer, str) else "",
            authorization_endpoint=_string(body.get("authorization_endpoint")),
            token_endpoint=token,
            registration_endpoint=_string(body.get("registration_endpoint")),
            scopes_supported=_strings(body.get("scopes_supported")),
            grant_types_supported=_strings(body.get("grant_types_supported")),
            code_challenge_methods_supported=_strings(body.get("code_challenge_methods_supported")),
            token_endpoint_auth_methods_supported=_strings(body.get("token_endpoint_auth_methods_supported")),
            client_id_metadata_document_supported=body.get("client_id_metadata_document_supported") is True,
            dpop_signing_alg_values_supported=_strings(body.get("dpop_signing_alg_values_supported")),
        )

    def check_pkce(self) -> None:
        """PKCE with S256 is required; metadata that lists methods without it is refused.
        (Absent: RFC 8414 servers of the 2025-03-26 era often omit it; we send S256.)"""
        methods = self.code_challenge_methods_supported
        if methods is not None and "S256" not in methods:
            raise DiscoveryError(
                f"the authorization server {safe_url(self.issuer)} does not support PKCE with S256"
            )


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _strings(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(v for v in value if isinstance(v, str))


def select_scope(
    configured: str | None,
    challenge: Challenge | None,
    resource: ResourceMetadata | None,
    server: ServerMetadata | None,
    *,
    want_refresh: bool = True,
) -> str | None:
    """The scope to request, by the spec's strategy: configured, else the challenge's,
    else everything the resource supports, else none (omitted). ``offline_access`` is
    added when the authorization server lists it and we want refresh tokens (SEP-2207),
    never when it does not."""
    if configured:
        scope = configured
    elif challenge is not None and challenge.scope:
        scope = challenge.scope
    elif resource is not None and resource.scopes_supported:
        scope = " ".join(resource.scopes_supported)
    else:
        scope = ""
    words = scope.split()
    supported = server.scopes_supported if server is not None else None
    if want_refresh and supported and OFFLINE_ACCESS in supported and OFFLINE_ACCESS not in words:
        words.append(OFFLINE_ACCESS)
    if supported is not None and OFFLINE_ACCESS not in supported:
        words = [word for word in words if word != OFFLINE_ACCESS]  # every occurrence
    return " ".join(words) or None


def merge_scopes(*scopes: str | None) -> str | None:
    """Union of space-separated scopes, first-seen order (for a step-up)."""
    words: list[str] = []
    for scope in scopes:
        for word in (scope or "").split():
            if word not in words:
                words.append(word)
    return " ".join(words) or None


def pick_auth_method(
    preferred: str | None, has_secret: bool, supported: Sequence[str] | None, has_key: bool = False
) -> str:
    """How to authenticate at the token endpoint: the registered or configured method;
    else, for a client with a secret, basic if supported (the OAuth default), else post;
    a key → private_key_jwt; a public client → none."""
    if preferred:
        return preferred
    if has_key:
        return "private_key_jwt"
    if not has_secret:
        return "none"
    if supported is None or "client_secret_basic" in supported:
        return "client_secret_basic"
    if "client_secret_post" in supported:
        return "client_secret_post"
    return "client_secret_basic"
