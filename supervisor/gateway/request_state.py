"""The ``requestState`` we mint for a new-era client's input-required round (pure).

A call that needs input (a backend asked for sampling, elicitation or roots) stays
parked in the gateway while the client answers; the state we hand out names that
parked call and its round. A client is untrusted, so the state is authenticated:
``payload.mac``, both URL-safe base64, the MAC an HMAC-SHA256 over the payload with
the shared keys (``supervisor/cluster/keys.py``): the cluster's, so any replica can
read a state another minted, else a key drawn per process, so a state from another
instance, or from before a restart, is refused like a forged one. The payload binds
the tenant, the replica run holding the parked call (``holder``), the call, its
round, the method and target (tool name, prompt name or URI) and an expiry on the
holder's Trio clock (only the holder checks it: another replica passes the retry on).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import attrs

from supervisor.cluster.keys import SharedKeys
from supervisor.cluster.replica import ReplicaIdentity

_PURPOSE = b"mcp-request-state"


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
    """On the holder's Trio clock (``trio.current_time()``)."""
    holder: str = ""
    """The replica run holding the parked call ("" for a single process)."""


class HeldElsewhere(StateRefused):
    """An authentic state of a call another replica run holds (``holder``)."""

    def __init__(self, claims: StateClaims) -> None:
        super().__init__(f"requestState names a call held by replica run {claims.holder!r}")
        self.claims = claims


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class RequestStateKey:
    """Mints and checks request states with the shared keys (see the module docstring)."""

    def __init__(self, keys: SharedKeys | None = None, holder: str = "") -> None:
        self._keys = keys if keys is not None else SharedKeys()
        self.holder = holder

    def _mac(self, payload: bytes) -> bytes:
        return self._keys.mac(payload, _PURPOSE)

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
        if self.holder:
            body["h"] = self.holder
        payload = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def check(self, state: Any, *, tenant: str, now: float) -> StateClaims:
        """The claims of an authentic, unexpired state of ``tenant`` this run holds;
        ``HeldElsewhere`` for one another replica run holds; ``StateRefused`` otherwise
        (forged, tampered, minted by another instance, foreign, expired)."""
        claims = self.read(state, tenant=tenant)
        if claims.holder != self.holder:
            raise HeldElsewhere(claims)
        if now >= claims.expires:
            raise StateRefused("requestState has expired: send the request again without it")
        return claims

    def read(self, state: Any, *, tenant: str) -> StateClaims:
        """The claims of an authentic state of ``tenant``, wherever it is held (its expiry
        is its holder's to check); ``StateRefused`` otherwise."""
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
        if not self._keys.verify(payload, _PURPOSE, mac):
            raise StateRefused(
                "requestState failed its integrity check (tampered, or issued by another gateway "
                "instance): send the request again without requestState"
            )
        body = json.loads(payload)
        claims = StateClaims(
            body["t"], body["c"], body["r"], body["m"], body["g"], body["e"], body.get("h", "")
        )
        if claims.tenant != tenant:
            raise StateRefused("requestState belongs to another tenant: send the request again without it")
        return claims


def state_key_of(replica: ReplicaIdentity | None) -> RequestStateKey:
    """A replica's key: the cluster's shared keys, holder its run; else a process's own."""
    if replica is None or replica.cluster is None:
        return RequestStateKey()
    return RequestStateKey(SharedKeys(replica.cluster.keys), holder=replica.incarnation)
