"""Opaque access tokens, asked of the issuers' introspection endpoints (RFC 7662).

The client authenticates with HTTP basic auth (``client_id`` and ``client_secret``).
An answer is kept until the token's ``exp``, at most ``KEEP_S``, under the token's
SHA-256 (never the token), in a bounded table; ``active: false`` and an answer for
another audience are refusals naming why. With several issuers that introspect, each
is asked in the config's order until one knows the token.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from supervisor.settings.signin import IssuerSettings, SigninSettings
from supervisor.web.idp_http import request_json
from supervisor.web.token_claims import SigninRefused, check_audience, check_times

KEEP_S = 60.0
MAX_KEPT = 10_000


class Introspector:
    """The introspecting issuers of one ``signin`` section, and their kept answers."""

    def __init__(
        self, settings: SigninSettings, clock: Callable[[], float], wall: Callable[[], float]
    ) -> None:
        """``clock`` keeps answers (trio's, mockable); ``wall`` reads ``exp`` (Unix time)."""
        self._resource = settings.resource
        self._issuers = [issuer for issuer in settings.issuers if issuer.introspection is not None]
        self._clock = clock
        self._wall = wall
        self._kept: OrderedDict[bytes, tuple[float, IssuerSettings, Mapping[str, Any]]] = OrderedDict()

    async def claims_of(self, token: str) -> tuple[IssuerSettings, Mapping[str, Any]]:
        """The issuer that vouches for ``token`` and what it says of it."""
        if not self._issuers:
            raise SigninRefused(
                "the bearer token is neither a static admin token nor a JWT, and no issuer has an "
                "introspection endpoint for opaque tokens (signin.issuers[].introspection)"
            )
        digest = hashlib.sha256(token.encode()).digest()
        kept = self._kept.get(digest)
        if kept is not None and kept[0] > self._clock():
            return kept[1], kept[2]
        for issuer in self._issuers:
            answer = await self._ask(issuer, token)
            if answer.get("active") is True:
                self._check(answer, issuer)
                self._keep(digest, issuer, answer)
                return issuer, answer
        names = ", ".join(issuer.issuer for issuer in self._issuers)
        raise SigninRefused(f"the token is not active (revoked, expired or unknown) according to {names}")

    async def _ask(self, issuer: IssuerSettings, token: str) -> Mapping[str, Any]:
        config = issuer.introspection
        assert config is not None
        answer = await request_json(
            issuer.issuer,
            "token introspection",
            "POST",
            config.endpoint,
            data={"token": token, "token_type_hint": "access_token"},
            auth=(config.client_id, config.client_secret),
            headers={"Accept": "application/json"},
        )
        return answer if isinstance(answer, dict) else {}

    def _check(self, answer: Mapping[str, Any], issuer: IssuerSettings) -> None:
        if answer.get("aud") is not None:  # RFC 7662 makes it optional
            check_audience(answer["aud"], self._resource)
        check_times(answer, issuer.leeway_s, self._wall(), need_exp=False)

    def _keep(self, digest: bytes, issuer: IssuerSettings, answer: Mapping[str, Any]) -> None:
        keep = KEEP_S
        exp = answer.get("exp")
        if isinstance(exp, int | float):
            keep = max(0.0, min(keep, exp - self._wall()))
        self._kept[digest] = (self._clock() + keep, issuer, answer)
        self._kept.move_to_end(digest)
        while len(self._kept) > MAX_KEPT:
            self._kept.popitem(last=False)
