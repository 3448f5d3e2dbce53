"""One issuer's JWK set, as sign-in checks tokens against it: fetched on first need,
kept, refreshed now and then, and fetched again for a key id it does not hold, boundedly.

Bounded both ways: a flood of tokens with random ``kid`` values becomes at most one
fetch per ``REFETCH_INTERVAL_S`` (the others are refused at once), and a set of more
than ``MAX_KEYS`` keys is refused. An identity provider that is down does not stop the
calls of a set fetched before: they go on with the kept keys, and the first failure of
each episode is logged once. Only when no set was ever fetched is a check refused
(``IdpUnavailable``, a 503). Without ``jwks_uri`` the set's URL comes from the issuer's
discovery document (OpenID Connect's, then RFC 8414's), learned once.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable

import trio
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from actors.log_events import get_logger
from supervisor.settings.signin import IssuerSettings
from supervisor.web.idp_http import IdpUnavailable, request_json

log = get_logger("supervisor.signin")

MAX_KEYS = 64
REFETCH_INTERVAL_S = 30.0
"""At most one fetch for an unknown key id per this long."""
RETRY_DOWN_S = 2.0
"""With no set ever fetched, a failed fetch answers the checks of this long after it."""
REFRESH_S = 3600.0
"""A kept set older than this is fetched again on its next use (rotation without a new kid)."""


def discovery_urls(issuer: str) -> tuple[str, ...]:
    """Where the issuer's metadata may be: OpenID Connect's path appended, then RFC 8414's
    inserted before the issuer's path."""
    parts = urllib.parse.urlsplit(issuer)
    path = parts.path.rstrip("/")
    base = f"{parts.scheme}://{parts.netloc}"
    return (
        f"{base}{path}/.well-known/openid-configuration",
        f"{base}/.well-known/oauth-authorization-server{path}",
    )


class IssuerKeys:
    """The kept JWK set of one issuer (see the module docstring)."""

    def __init__(self, issuer: IssuerSettings, clock: Callable[[], float] = trio.current_time) -> None:
        self.issuer = issuer
        self._clock = clock
        self._jwks_uri = issuer.jwks_uri
        self._keys: KeySet | None = None
        self._fetched_at = -float("inf")
        self._tried_at = -float("inf")
        self._failing = False
        self._last_error: IdpUnavailable | None = None
        self._lock = trio.Lock()

    async def key_set(self, kid: str | None) -> KeySet:
        """The set to check a token of ``kid`` with (fetched again if it lacks ``kid`` or
        is old, at most once per ``REFETCH_INTERVAL_S``); ``IdpUnavailable`` when no set
        was ever fetched and fetching fails."""
        keys = self._keys
        now = self._clock()
        stale = (
            keys is None or now - self._fetched_at > REFRESH_S or (kid is not None and not _holds(keys, kid))
        )
        if keys is None and self._last_error is not None and now - self._tried_at < RETRY_DOWN_S:
            raise self._last_error  # down a moment ago: no fetch per request while it stays down
        if stale and (keys is None or now - self._tried_at >= REFETCH_INTERVAL_S):
            async with self._lock:
                if self._tried_at < now:  # nobody tried while we waited: one fetch for all
                    await self._refresh(must=keys is None)
        if self._keys is None:
            assert self._last_error is not None
            raise self._last_error
        return self._keys

    async def _refresh(self, *, must: bool) -> None:
        self._tried_at = self._clock()
        try:
            self._keys = await self._fetch()
        except IdpUnavailable as exc:
            if must:
                self._last_error = exc
                raise
            if not self._failing:
                self._failing = True
                log.warning(
                    "identity provider unreachable: calls go on with its kept keys",
                    extra={"fields": {"issuer": self.issuer.issuer, "reason": str(exc)}},
                )
            return
        self._fetched_at = self._clock()
        self._failing, self._last_error = False, None

    async def _fetch(self) -> KeySet:
        name = self.issuer.issuer
        if self._jwks_uri is None:
            self._jwks_uri = await self._discover()
        doc = await request_json(name, "the JWK set", "GET", self._jwks_uri)
        keys = doc.get("keys") if isinstance(doc, dict) else None
        if not isinstance(keys, list):
            raise IdpUnavailable(f"issuer {name}: the JWK set has no 'keys' list")
        if len(keys) > MAX_KEYS:
            raise IdpUnavailable(f"issuer {name}: the JWK set holds {len(keys)} keys, more than {MAX_KEYS}")
        usable = [k for k in keys if isinstance(k, dict) and k.get("kty") in ("RSA", "EC", "OKP")]
        try:
            return KeySet.import_key_set({"keys": usable})
        except (JoseError, ValueError, TypeError) as exc:
            raise IdpUnavailable(
                f"issuer {name}: the JWK set holds a key that cannot be read ({exc})"
            ) from None

    async def _discover(self) -> str:
        name = self.issuer.issuer
        failures = []
        for url in discovery_urls(name):
            try:
                doc = await request_json(name, "the discovery document", "GET", url)
            except IdpUnavailable as exc:
                failures.append(str(exc))
                continue
            uri = doc.get("jwks_uri") if isinstance(doc, dict) else None
            if isinstance(uri, str) and uri.startswith(("https://", "http://")):
                return uri
            failures.append(f"issuer {name}: the discovery document at {url} names no jwks_uri")
        raise IdpUnavailable("; ".join(failures) + " (or set jwks_uri for this issuer in the config)")


def _holds(keys: KeySet, kid: str) -> bool:
    return any(key.kid == kid for key in keys.keys)
