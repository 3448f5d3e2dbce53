"""The keys replicas share, to authenticate what one mints and another checks (pure).

A session id, a ``requestState`` or a forwarded request minted by one replica is
checked by any other: all of them hold the same keys (``cluster.keys``). The first key
signs; every key is accepted, so a rotation is: give every replica the list with the
new key first (both are accepted, nothing minted before is refused), then, once every
replica runs that list, drop the old key. Without a cluster the key is drawn per
process: what it minted is refused after a restart, like a forgery.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence

KEY_BYTES = 32


class SharedKeys:
    """HMAC-SHA256 with the first key; a MAC by any of them is accepted."""

    def __init__(self, keys: Sequence[bytes] = ()) -> None:
        self._keys = tuple(keys) or (secrets.token_bytes(KEY_BYTES),)
        self.shared = bool(keys)
        """Whether the keys came from the config (every replica holds them)."""

    def mac(self, payload: bytes, purpose: bytes) -> bytes:
        """The MAC of ``payload`` for ``purpose`` (a session id is no request state)."""
        return hmac.new(self._keys[0], purpose + b"\0" + payload, hashlib.sha256).digest()

    def verify(self, payload: bytes, purpose: bytes, mac: bytes, *, size: int | None = None) -> bool:
        """Whether ``mac`` (its first ``size`` bytes, if given) is one of the keys' MAC."""
        for key in self._keys:
            expected = hmac.new(key, purpose + b"\0" + payload, hashlib.sha256).digest()
            if hmac.compare_digest(mac, expected[:size] if size is not None else expected):
                return True
        return False
