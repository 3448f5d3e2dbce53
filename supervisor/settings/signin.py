"""The ``signin`` section: ``/mcp`` and the admin API as an OAuth 2.1 resource server.

Absent, sign-in is off and nothing changes. Present, ``resource`` (this service's public
base URL, the audience every access token must carry) is required, and each issuer
names how its tokens are checked and how their claims map to a tenant, a person and a
role (docs/identity.md, "Sign-in"). Algorithms that make a public key a shared secret
(``none``, every ``HS*``) are refused here, at load, so no later check has to.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping

import attrs

from .expansion import Expander
from .net import is_loopback_host
from .values import Invalid, check_keys, child, expect_list, expect_number, expect_object, show

DEFAULT_ALGORITHMS = ("RS256", "PS256", "ES256", "EdDSA")
KNOWN_ALGORITHMS = (
    *("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    *("ES256", "ES384", "ES512", "ES256K", "EdDSA", "Ed25519"),
)
_ISSUER_KEYS = (
    "issuer", "jwks_uri", "algorithms", "leeway_s", "tenant", "tenant_claim",
    "person_claim", "roles", "introspection",
)  # fmt: skip


@attrs.frozen(slots=True)
class RoleMapping:
    """Which claim holds the caller's scopes or groups, and which values make a role."""

    claim: str = "scope"
    operator: tuple[str, ...] = ()
    peer: tuple[str, ...] = ()


@attrs.frozen(slots=True)
class Introspection:
    """An RFC 7662 endpoint for opaque tokens, with the client that may ask it."""

    endpoint: str
    client_id: str
    client_secret: str = attrs.field(repr=False)


@attrs.frozen(slots=True)
class IssuerSettings:
    """One trusted identity provider."""

    issuer: str
    jwks_uri: str | None = None
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    leeway_s: float = 30.0
    tenant: str | None = None
    tenant_claim: str | None = None
    person_claim: str = "sub"
    roles: RoleMapping = RoleMapping()
    introspection: Introspection | None = None


@attrs.frozen(slots=True)
class SigninSettings:
    """The resource this service is, and the issuers whose tokens it accepts."""

    resource: str
    issuers: tuple[IssuerSettings, ...]

    @property
    def secrets(self) -> tuple[str, ...]:
        """The introspection clients' secrets, for the scrubber."""
        return tuple(i.introspection.client_secret for i in self.issuers if i.introspection is not None)


def read_signin(value: object, path: str, exp: Expander) -> SigninSettings | None:
    """The section at ``path`` (None when absent: sign-in off)."""
    if value is None:
        return None
    example = (
        '{"resource": "https://mcp.example.com", "issuers": [{"issuer": "https://idp.example.com/", ...}]}'
    )
    obj = expect_object(value, path, f"an object like {example}")
    check_keys(obj, path, ("resource", "issuers"))
    if "resource" not in obj:
        problem = (
            "'resource' is missing: give this service's public base URL as clients reach it "
            '(like "https://mcp.example.com"); behind a TLS proxy serve cannot know it'
        )
        raise Invalid(path, problem)
    resource = _url(obj["resource"], child(path, "resource"), exp, "this service's public base URL")
    where = child(path, "issuers")
    entries = expect_list(obj.get("issuers"), where, 'a list of issuers, like [{"issuer": "https://idp/"}]')
    if not entries:
        raise Invalid(where, "the list is empty; name the identity provider whose tokens to accept")
    issuers = tuple(_issuer(entry, child(where, i), exp) for i, entry in enumerate(entries))
    seen: set[str] = set()
    for i, issuer in enumerate(issuers):
        if issuer.issuer in seen:
            raise Invalid(child(child(where, i), "issuer"), f"issuer {issuer.issuer!r} is listed twice")
        seen.add(issuer.issuer)
    return SigninSettings(resource.rstrip("/"), issuers)


def _issuer(value: object, path: str, exp: Expander) -> IssuerSettings:
    obj = expect_object(
        value, path, 'an issuer like {"issuer": "https://idp.example.com/", "tenant": "acme"}'
    )
    check_keys(obj, path, _ISSUER_KEYS)
    if "issuer" not in obj:
        raise Invalid(
            path, "'issuer' is missing: give the identity provider's issuer URL, as its tokens' iss"
        )
    issuer = _url(obj["issuer"], child(path, "issuer"), exp, "the issuer URL, exactly as its tokens' iss")
    jwks = obj.get("jwks_uri")
    jwks_uri = None if jwks is None else _url(jwks, child(path, "jwks_uri"), exp, "the URL of its JWK set")
    has_tenant, has_claim = "tenant" in obj, "tenant_claim" in obj
    if has_tenant == has_claim:
        problem = (
            "give exactly one of 'tenant' (one tenant for everyone this issuer signs in) "
            "or 'tenant_claim' (the claim that names the caller's tenant, such as \"org\")"
        )
        raise Invalid(path, problem)
    return IssuerSettings(
        issuer=issuer,
        jwks_uri=jwks_uri,
        algorithms=_algorithms(obj.get("algorithms"), child(path, "algorithms")),
        leeway_s=expect_number(obj.get("leeway_s", 30), child(path, "leeway_s"), positive=False),
        tenant=_name(obj["tenant"], child(path, "tenant"), exp) if has_tenant else None,
        tenant_claim=_name(obj["tenant_claim"], child(path, "tenant_claim"), exp) if has_claim else None,
        person_claim=_name(obj.get("person_claim", "sub"), child(path, "person_claim"), exp),
        roles=_roles(obj.get("roles", {}), child(path, "roles"), exp),
        introspection=_introspection(obj.get("introspection"), child(path, "introspection"), exp),
    )


def _algorithms(value: object, path: str) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_ALGORITHMS
    entries = expect_list(value, path, 'a list of JWS algorithms, like ["RS256", "ES256"]')
    if not entries:
        raise Invalid(path, f"the list is empty; leave it out for the default {list(DEFAULT_ALGORITHMS)}")
    for i, alg in enumerate(entries):
        at = child(path, i)
        if not isinstance(alg, str):
            raise Invalid(at, f'expected an algorithm name like "RS256", got {show(alg)}')
        if alg.lower() == "none" or alg.upper().startswith("HS"):
            problem = (
                f"{alg!r} is refused: it would accept unsigned tokens or make the issuer's public "
                f"key a shared secret; use asymmetric ones such as {', '.join(DEFAULT_ALGORITHMS)}"
            )
            raise Invalid(at, problem)
        if alg not in KNOWN_ALGORITHMS:
            raise Invalid(at, f"unknown algorithm {alg!r}; known: {', '.join(KNOWN_ALGORITHMS)}")
    return tuple(entries)


def _roles(value: object, path: str, exp: Expander) -> RoleMapping:
    obj = expect_object(value, path, 'an object like {"claim": "scope", "operator": ["mcp:admin"]}')
    check_keys(obj, path, ("claim", "operator", "peer"))
    lists: Mapping[str, tuple[str, ...]] = {
        key: tuple(
            _name(item, child(child(path, key), i), exp)
            for i, item in enumerate(expect_list(obj.get(key, []), child(path, key), "a list of values"))
        )
        for key in ("operator", "peer")
    }
    return RoleMapping(_name(obj.get("claim", "scope"), child(path, "claim"), exp), **lists)


def _introspection(value: object, path: str, exp: Expander) -> Introspection | None:
    if value is None:
        return None
    example = '{"endpoint": "https://idp/introspect", "client_id": "mcp", "client_secret": "${env:X}"}'
    obj = expect_object(value, path, f"an object like {example}")
    check_keys(obj, path, ("endpoint", "client_id", "client_secret"))
    for key in ("endpoint", "client_id", "client_secret"):
        if key not in obj:
            raise Invalid(path, f"{key!r} is missing; an introspection block is like {example}")
    return Introspection(
        endpoint=_url(obj["endpoint"], child(path, "endpoint"), exp, "the introspection endpoint's URL"),
        client_id=_name(obj["client_id"], child(path, "client_id"), exp),
        client_secret=_name(obj["client_secret"], child(path, "client_secret"), exp, secret=True),
    )


def _name(value: object, path: str, exp: Expander, *, secret: bool = False) -> str:
    text = exp.text(value, path, "a non-empty string")
    if not text.strip():
        raise Invalid(path, "expected a non-empty string" + ("" if secret else f", got {show(value)}"))
    return text


def _url(value: object, path: str, exp: Expander, what: str) -> str:
    """An https URL (http only for a loopback host, as in tests and local proxies)."""
    text = exp.text(value, path, f"{what}, a URL")
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.fragment or parts.query:
        raise Invalid(path, f"expected {what}, an https:// URL without query or fragment, got {show(text)}")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise Invalid(path, f"{show(text)} is plain http; use https:// (http is only for a loopback host)")
    return text
