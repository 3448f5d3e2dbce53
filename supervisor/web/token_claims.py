"""What an access token's claims must say, and who they say the caller is: the checks
a JWT (``signin.py``) and an introspection answer (``introspection.py``) share.

Every refusal is a ``SigninRefused`` whose message names what is wrong and how to get
it right, quoting claims (shortened) but never the token.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from supervisor.settings.model import Role
from supervisor.settings.signin import IssuerSettings
from supervisor.settings.values import show
from supervisor.web.roles import Principal


class SigninRefused(Exception):
    """A token that does not sign anyone in; the message is the reason, for the client."""


def _at(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _shown(value: object) -> str:
    text = show(value)
    return text[1:-1] if text.startswith('"') and text.endswith('"') and len(text) > 1 else text


def check_audience(aud: object, resource: str) -> None:
    """The token is for this service: ``resource`` is its ``aud`` or one of them (RFC 8707)."""
    audiences = aud if isinstance(aud, list) else [aud]
    if any(isinstance(a, str) and a.rstrip("/") == resource for a in audiences):
        return
    shown = "missing" if aud is None else _shown(aud)
    raise SigninRefused(
        f"the token's audience is {shown}, not this service's resource {resource} "
        "(ask the identity provider for a token for this resource, RFC 8707)"
    )


def check_times(claims: Mapping[str, Any], leeway_s: float, now: float, *, need_exp: bool = True) -> None:
    """``exp`` (required for a JWT) and ``nbf``, each with ``leeway_s``."""
    exp, nbf = claims.get("exp"), claims.get("nbf")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        if need_exp or exp is not None:
            raise SigninRefused("the token has no exp (expiry) claim, which access tokens must carry")
    elif now > exp + leeway_s:
        raise SigninRefused(f"the token expired at {_at(exp)} ({now - exp:.0f} s ago); get a new one")
    if nbf is None:
        return
    if not isinstance(nbf, int | float) or isinstance(nbf, bool):
        raise SigninRefused(f"the token's nbf claim is {show(nbf)}, not a time")
    if now + leeway_s < nbf:
        raise SigninRefused(f"the token is not valid before {_at(nbf)} (its nbf claim)")


def principal_of_claims(issuer: IssuerSettings, claims: Mapping[str, Any], token: str) -> Principal:
    """Tenant, person and role, as ``issuer``'s settings map its claims."""
    if issuer.tenant is not None:
        tenant = issuer.tenant
    else:
        assert issuer.tenant_claim is not None
        tenant = _claim_text(claims, issuer.tenant_claim, issuer, "the caller's tenant")
    person = _claim_text(claims, issuer.person_claim, issuer, "the person signed in")
    return Principal(tenant, _role(claims, issuer), person=person, token=token)


def _claim_text(claims: Mapping[str, Any], name: str, issuer: IssuerSettings, what: str) -> str:
    value = claims.get(name)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str) or not value.strip():
        got = "the token has none" if value is None else f"the token's is {show(value)}"
        raise SigninRefused(
            f"the {name!r} claim names {what} for issuer {issuer.issuer}, and {got} "
            "(a non-empty string); ask the identity provider to include it"
        )
    return value


def _role(claims: Mapping[str, Any], issuer: IssuerSettings) -> Role:
    held = claims.get(issuer.roles.claim)
    values: set[str] = set()
    if isinstance(held, str):
        values = set(held.split())
    elif isinstance(held, list):
        values = {value for value in held if isinstance(value, str)}
    if values & set(issuer.roles.operator):
        return Role.OPERATOR
    if values & set(issuer.roles.peer):
        return Role.PEER
    return Role.TENANT
