"""The ``requestState`` we mint for a new-era client's input-required round (pure).

A call that needs input (a backend asked for sampling, elicitation or roots) stays
parked in the gateway while the client answers; the state we hand out names that
parked call and its round. A client is untrusted, so the state is authenticated:
``payload.mac``, both URL-safe base64, the MAC an HMAC-SHA256 over the payload with
a key drawn per gateway instance (``secrets.token_bytes``), so a state from another
instance, or from before a restart, is refused like a forged one. The payload binds
the tenant, the parked call, its round, the method and target (tool name, prompt
name or URI) and an expiry on the Trio clock.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from typing import Any

import attrs

KEY_BYTES = 32


class StateRefused(Exception):
    """A ``requestState`` we will not honour; the message says why and what to do."""


@attrs.frozen(slots=True)
class StateClaims:
    """What an authentic request state says."""

    tenant: str
    call: str
    """The parked call's id."""
    round: int
    method: str
    target: str
    expires: float
    """On the Trio clock (``trio.current_time()``)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class RequestStateKey:
    """Mints and checks request states with one per-instance HMAC key."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(KEY_BYTES)

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()

    def mint(self, claims: StateClaims) -> str:
        """The opaque state a client echoes on its retry."""
        body = {
            "t": claims.tenant,
            "c": claims.call,
            "r": claims.round,
            "m": claims.method,
            "g": claims.target,
            "e": claims.expires,
        }
        payload = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def check(self, state: Any, *, tenant: str, now: float) -> StateClaims:
        """The claims of an authentic, unexpired state of ``tenant``; ``StateRefused``
        otherwise (forged, tampered, minted by another instance, foreign, expired)."""
        if not isinstance(state, str) or state.count(".") != 1:
            raise StateRefused(
                "requestState is not one this gateway issued: send the request again without it"
            )
        payload_text, mac_text = state.split(".")
        try:
            payload, mac = _unb64(payload_text), _unb64(mac_text)
        except (binascii.Error, ValueError):
            raise StateRefused(
                "requestState is not one this gateway issued: send the request again without it"
            ) from None
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise StateRefused(
                "requestState failed its integrity check (tampered, or issued by another gateway "
                "instance): send the request again without requestState"
            )
        body = json.loads(payload)
        claims = StateClaims(body["t"], body["c"], body["r"], body["m"], body["g"], body["e"])
        if claims.tenant != tenant:
            raise StateRefused("requestState belongs to another tenant: send the request again without it")
        if now >= claims.expires:
            raise StateRefused("requestState has expired: send the request again without it")
        return claims
