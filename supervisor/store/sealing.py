"""Secrets at rest: the store's OAuth records sealed with AES-256-GCM.

A record holds access and refresh tokens, a client secret and a DPoP private key, so
the file's mode (0600) is not the only guard: each record is sealed as a whole with
the first configured key and opened with whichever configured key sealed it (the key
id in front says which). The associated data is the row's server and URL (and its
person, for a person's own record), so a ciphertext copied into another row does not
open. AES-GCM (not Fernet): Fernet's AES-128-CBC with HMAC has no associated data to
bind a record to its row.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Sequence

PREFIX = "sealed:v1:"
"""How a sealed record starts; a record without it is plaintext JSON from before."""

NONCE_BYTES = 12


class Unopenable(Exception):
    """No configured key opens this record (the key is lost, or the row was tampered with)."""


def key_id(key: bytes) -> str:
    """A short name of a key that gives nothing of it away (the first 8 bytes of its SHA-256)."""
    return hashlib.sha256(key).hexdigest()[:16]


def bound_to(server: str, url: str, person: str = "") -> bytes:
    """The associated data of a record: the row it belongs in. A person's own record
    (a ``per_user`` server's) is bound to that person too, so it does not open in
    another person's row; a shared record (person "") is bound as before migration 10,
    so the records sealed then still open."""
    return json.dumps([server, url, person] if person else [server, url]).encode()


class Sealer:
    """Seals with the first key, opens with any (rotation keeps the old key second)."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # only when sealing

        if not keys:
            raise ValueError("a sealer needs at least one key")
        self._ciphers = {key_id(key): AESGCM(key) for key in reversed(keys)}
        self.current = key_id(keys[0])

    def seal(self, text: str, bound: bytes) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.current].encrypt(nonce, text.encode(), bound)
        return f"{PREFIX}{self.current}:{base64.b64encode(nonce + sealed).decode()}"

    def open(self, stored: str, bound: bytes) -> str:
        """The plaintext of a sealed record; Unopenable when no key opens it."""
        from cryptography.exceptions import InvalidTag

        kid, _, body = stored.removeprefix(PREFIX).partition(":")
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise Unopenable(f"sealed with key {kid}, which is not configured")
        try:
            raw = base64.b64decode(body, validate=True)
            return cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], bound).decode()
        except (binascii.Error, ValueError, InvalidTag):
            raise Unopenable(f"does not open with key {kid} (altered, or moved from another row)") from None

    def is_current(self, stored: str) -> bool:
        """Sealed with the first key already (nothing for a rotation to do)."""
        return stored.startswith(f"{PREFIX}{self.current}:")
