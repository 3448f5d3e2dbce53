"""Sign-in: a bearer token that is no static admin token, checked as an OAuth 2.1
resource server checks an access token, and mapped to who the caller is.

A JWT (a JWS compact string) is checked against its issuer's JWK set (``key_sets.py``):
the algorithm (never ``none`` nor HMAC, only the issuer's list), the issuer (compared
exactly), the signature, the audience (this service's ``resource``, RFC 8707), the
expiry and ``nbf`` with the issuer's leeway. Anything else is an opaque token, asked
of an introspection endpoint (``introspection.py``) where one is configured. Each
refusal is a ``SigninRefused`` whose reason names what is wrong, never the token; an
identity provider that cannot answer is ``IdpUnavailable`` (a 503).

The claims then name the tenant (a fixed one, or the issuer's ``tenant_claim``), the
person (``person_claim``, default ``sub``) and the role (``roles``: operator, peer, or
tenant). Nothing here touches a request: the guard asks, and words the answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson
import trio
from joserfc import jws
from joserfc.errors import BadSignatureError, InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from supervisor.settings.signin import IssuerSettings, SigninSettings
from supervisor.settings.values import show
from supervisor.web.introspection import Introspector
from supervisor.web.key_sets import REFETCH_INTERVAL_S, IssuerKeys
from supervisor.web.roles import Principal
from supervisor.web.token_claims import SigninRefused, check_audience, check_times, principal_of_claims


def looks_like_jws(token: str) -> bool:
    """A JWS compact string has three dot-separated parts (opaque tokens rarely do)."""
    return token.count(".") == 2


class SignIn:
    """The checks of one ``signin`` section, with their kept key sets and answers."""

    def __init__(
        self,
        settings: SigninSettings,
        *,
        clock: Callable[[], float] = trio.current_time,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._wall = wall
        self.keys = {issuer.issuer: IssuerKeys(issuer, clock) for issuer in settings.issuers}
        self._introspector = Introspector(settings, clock, wall)

    async def principal_of(self, token: str) -> Principal:
        """Who ``token`` signs in; ``SigninRefused`` or ``IdpUnavailable`` otherwise."""
        if not looks_like_jws(token):
            issuer, claims = await self._introspector.claims_of(token)
        else:
            issuer, claims = await self._checked_jwt(token)
        return principal_of_claims(issuer, claims, token)

    async def _checked_jwt(self, token: str) -> tuple[IssuerSettings, Mapping[str, Any]]:
        try:
            unverified = jws.extract_compact(token.encode())
            header = unverified.headers()
            payload = _json_object(unverified.payload)
        except (JoseError, ValueError, TypeError, UnicodeDecodeError):
            raise SigninRefused(
                "the bearer token is not a well-formed JWT (header.payload.signature)"
            ) from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg.lower() == "none":
            raise SigninRefused("the token is unsigned (alg none), which is never accepted")
        if alg.upper().startswith("HS"):
            raise SigninRefused(
                f"the token is signed with {show(alg)}, a shared-secret algorithm, which is never "
                "accepted: an issuer signs access tokens with its private key"
            )
        issuer = self._issuer_of(payload.get("iss"))
        if alg not in issuer.algorithms:
            raise SigninRefused(
                f"the token is signed with {show(alg)}, not one of issuer {issuer.issuer}'s "
                f"algorithms ({', '.join(issuer.algorithms)})"
            )
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise SigninRefused(f"the token's key id (kid) is {show(kid)}, not a string")
        key_set = await self.keys[issuer.issuer].key_set(kid)
        self._verify(token, key_set, alg, kid, issuer)
        check_times(payload, issuer.leeway_s, self._wall())
        check_audience(payload.get("aud"), self.settings.resource)
        return issuer, payload

    def _issuer_of(self, iss: object) -> IssuerSettings:
        for issuer in self.settings.issuers:
            if iss == issuer.issuer:
                return issuer
        trusted = ", ".join(issuer.issuer for issuer in self.settings.issuers)
        if iss is None:
            raise SigninRefused(f"the token has no iss (issuer) claim; this service trusts {trusted}")
        raise SigninRefused(f"the token's issuer {show(iss)} is not one this service trusts ({trusted})")

    def _verify(self, token: str, key_set: KeySet, alg: str, kid: str | None, issuer: IssuerSettings) -> None:
        try:
            jws.deserialize_compact(token, key_set, algorithms=[alg])
        except InvalidKeyIdError:
            if kid is None:
                problem = f"the token names no key id (kid), and issuer {issuer.issuer}'s key set has several"
                raise SigninRefused(problem) from None
            raise SigninRefused(
                f"the token's key id {show(kid)} is not in issuer {issuer.issuer}'s key set "
                f"(fetched again at most every {REFETCH_INTERVAL_S:g} s)"
            ) from None
        except BadSignatureError:
            raise SigninRefused(
                f"the token's signature does not verify with issuer {issuer.issuer}'s key "
                "(it was altered, or signed with another key)"
            ) from None
        except (JoseError, ValueError) as exc:
            raise SigninRefused(
                f"the token cannot be checked with issuer {issuer.issuer}'s keys ({type(exc).__name__})"
            ) from None


def _json_object(payload: bytes) -> Mapping[str, Any]:
    claims = orjson.loads(payload)
    if not isinstance(claims, dict):
        raise ValueError("the payload is not a JSON object")
    return claims
