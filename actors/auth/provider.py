"""The OAuth 2.1 client of one remote server: what the ``authenticate`` state runs.

An :class:`OAuthProvider` lives as long as the supervisor (one per server, kept by the
remote connector across reconnects) and gives the HTTP transport three things:

- :meth:`prepare` — the ``authenticate`` state: load the stored record, refresh an
  access token that expired (also one that expired while we were not running: the
  expiry is stored as an absolute time), or run the client-credentials grant;
- :meth:`authorization` — the ``Authorization`` header value for the next request, and
  :meth:`proof` its ``DPoP`` header when the token is DPoP-bound (:mod:`actors.auth.dpop`;
  :meth:`dpop_nonce` takes the server's nonces and says when a request is worth a retry);
- :meth:`unauthorized` / :meth:`insufficient_scope` — a 401 or a 403
  ``insufficient_scope`` came back: refresh (or run the whole flow: discovery,
  registration, authorization, token), so the caller can retry **once**; when nothing
  can help, raise :class:`~actors.transport_errors.AuthRequired` with ``needs_login``,
  which parks the server in the ``needs_auth`` condition instead of a retry loop.

This module decides *when* (one lock per server, so concurrent 401s renew once; with a
vault that offers a refresh lease, such as the store's, one process of those sharing it
at a time, which first reads what another may have stored meanwhile; the step-up count;
no token storm after a refusal); the grants themselves are
:mod:`actors.auth.flows`, and their requests :mod:`actors.auth.http`. What a host hands
in (an :class:`Authorizer`, a :class:`TokenVault`, the :class:`OAuthSettings`) is
importable from here too.

Tokens never appear in an error text or a log line: texts name the server and the step
and carry at most the authorization server's ``error`` code.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import httpx2
import trio

from actors.auth.authorizers import Authorizer
from actors.auth.discovery import merge_scopes, parse_challenge
from actors.auth.dpop import NONCE_ERROR
from actors.auth.errors import auth_failed
from actors.auth.flows import OAuthFlows
from actors.auth.records import AuthRecord
from actors.auth.settings import OAuthSettings
from actors.auth.vault import LeasingVault, MemoryVault, TokenVault
from actors.log_events import get_logger

__all__ = ["MAX_STEP_UPS", "Authorizer", "MemoryVault", "OAuthProvider", "OAuthSettings", "TokenVault"]

# A server that keeps asking for more scope after this many step-ups is looping.
MAX_STEP_UPS = 2

_log = get_logger("actors.auth")


class OAuthProvider:
    """OAuth for one server (see the module docstring)."""

    def __init__(
        self,
        server: str,
        url: str,
        settings: OAuthSettings,
        vault: TokenVault,
        authorizer: Authorizer | None = None,
        *,
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.time,
        transport: httpx2.AsyncBaseTransport | None = None,
        subject_token: Callable[[], str | None] | None = None,
    ) -> None:
        self.server = server
        self.url = url
        self.settings = settings
        self._clock = clock
        self._vault = vault
        # A renewal may make two token requests (a DPoP nonce retry): the lease outlasts both.
        self.lease_s = 2 * timeout_s + 5
        self._flows = OAuthFlows(
            server, url, settings, vault, authorizer, timeout_s=timeout_s, clock=clock, transport=transport,
            subject_token=subject_token,
        )  # fmt: skip
        self._lock = trio.Lock()
        self._step_ups = 0
        self._refused = False  # a fresh token was refused: renewing again is pointless

    def authorization(self) -> str | None:
        """The ``Authorization`` header value, or None before the first token."""
        tokens = self._flows.record.tokens
        return None if tokens is None else f"{tokens.token_type} {tokens.access_token}"

    def proof(self, method: str, url: str) -> dict[str, str]:
        """The ``DPoP`` header that goes with :meth:`authorization` (a fresh proof with
        ``ath``), or nothing for a bearer token."""
        tokens = self._flows.record.tokens
        signer = self._flows.signer()
        if tokens is None or signer is None or tokens.token_type != "DPoP":
            return {}
        return signer.headers(method, url, tokens.access_token)

    def dpop_nonce(self, url: str, nonce: str | None, status: int, challenge: str | None) -> bool:
        """A response from the MCP server: its ``DPoP-Nonce`` goes into later proofs; True
        when it refused the request for want of that (new) nonce (a 401
        ``use_dpop_nonce``, RFC 9449 §9), so the request is worth one retry."""
        signer = self._flows.signer()
        if signer is None or not signer.note_nonce(url, nonce) or status != 401:
            return False
        parsed = parse_challenge(challenge)
        return parsed is not None and parsed.error == NONCE_ERROR

    async def prepare(self) -> None:
        """The ``authenticate`` state: have a token ready if one can be had without a
        person. With none, the first request goes without and its 401 starts the flow."""
        async with self._lock:
            self._refused = False  # a new attempt (e.g. a restart after `auth login`)
            await self._flows.load()
            if self._stale():
                await self._shared(self._stale, self._renew_unattended)

    def expired(self) -> bool:
        """Is the current access token past its expiry (with the leeway)? Cheap: the
        transport asks before every request."""
        tokens = self._flows.record.tokens
        return tokens is not None and tokens.expired(self._clock())

    async def renew(self) -> None:
        """Before a request: an access token that expired during the session is
        refreshed (or re-granted by a headless flow) instead of being sent to die. When
        a refresh is refused, the request goes as it is and its 401 takes the usual path."""
        async with self._lock:
            if not self.expired() or self._refused:
                return  # renewed meanwhile by another request, or nothing to renew
            await self._shared(self.expired, self._renew_unattended)

    async def unauthorized(self, used: str | None, header: str | None) -> None:
        """A request with ``used`` (an Authorization value, or None) got a 401: get a
        new token so the caller may retry once, or raise AuthRequired."""
        async with self._lock:
            if self._refused:
                raise auth_failed(self.server, "the server refused a fresh token")
            if used is not None and self.authorization() not in (None, used):
                return  # another request renewed it meanwhile: just retry
            challenge = parse_challenge(header)
            tokens = self._flows.record.tokens
            if (
                used is not None
                and tokens is not None
                and tokens.refresh_token
                and not await self._flows.moved(challenge)
            ):
                renewed = [False]

                async def refresh() -> None:
                    renewed[0] = await self._flows.refresh()

                await self._shared(lambda: self.authorization() in (None, used), refresh)
                if renewed[0] or self.authorization() not in (None, used):
                    return  # refreshed, here or by a process sharing the vault
            await self._flows.full_flow(challenge, scope_hint=None)

    async def insufficient_scope(self, used: str | None, header: str | None) -> None:
        """A 403 ``insufficient_scope``: authorize again with the union of scopes
        (step-up), at most ``MAX_STEP_UPS`` times in a row."""
        async with self._lock:
            if used is not None and self.authorization() not in (None, used):
                return
            challenge = parse_challenge(header)
            if self._step_ups >= MAX_STEP_UPS:
                raise auth_failed(
                    self.server, "the server keeps asking for more scope (step-up limit reached)"
                )
            self._step_ups += 1
            tokens = self._flows.record.tokens
            current = tokens.scope if tokens else None
            wanted = merge_scopes(current, challenge.scope if challenge else None)
            await self._flows.full_flow(challenge, scope_hint=wanted)

    def _stale(self) -> bool:
        tokens = self._flows.record.tokens
        return tokens is None or tokens.expired(self._clock())

    async def _renew_unattended(self) -> None:
        await self._flows.renew_unattended(self._flows.record.tokens)

    async def _shared(self, needed: Callable[[], bool], renew: Callable[[], Awaitable[None]]) -> None:
        """``renew`` under the vault's refresh lease when it has one: first the record
        as stored now is taken (another process may have renewed it while this one
        waited), and ``renew`` runs only if that still leaves it ``needed``. A lease
        that cannot be had (the store away) does not stop the renewal."""
        async with AsyncExitStack() as held:
            if isinstance(self._vault, LeasingVault):
                try:
                    lease = self._vault.renewing(self.server, self.url, lease_s=self.lease_s)
                    stored = await held.enter_async_context(lease)
                except Exception as exc:
                    fields = {"server": self.server, "reason": str(exc)}
                    _log.warning(
                        "cannot take the refresh lease; refreshing without", extra={"fields": fields}
                    )
                else:
                    record = AuthRecord.from_json(stored) if stored is not None else None
                    if record is not None:
                        self._flows.record = record
            if needed():
                await renew()

    def succeeded(self) -> None:
        """A request went through with our token: a later 403 starts a new step-up count."""
        self._step_ups = 0

    def refused(self) -> None:
        """The retry with a renewed token got a 401 too: until the next attempt, every
        other request's 401 fails at once instead of renewing again (no token storm)."""
        self._refused = True

    async def login(self, header: str | None) -> None:
        """``auth login``: forget the tokens and run the whole flow with the authorizer."""
        async with self._lock:
            await self._flows.load()
            await self._flows.full_flow(parse_challenge(header), scope_hint=None)  # it drops the tokens
