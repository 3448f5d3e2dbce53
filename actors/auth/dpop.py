"""DPoP (RFC 9449): tokens bound to a key pair of ours, each request signed with it.

A server's client keeps one P-256 key pair (ES256) in its stored record (the vault:
the store's ``oauth`` table, file mode 0600), so a token bound to it still works after a
restart. Every token request and every request to the MCP server then carries a fresh
proof in the ``DPoP`` header: a JWT with the public key in its header and ``htm`` (the
method), ``htu`` (the URL without query or fragment), ``iat``, a new ``jti`` and, for the
MCP server, ``ath`` (the hash of the access token it goes with), signed by the private key.

A server may ask for its own nonce (``use_dpop_nonce`` with a ``DPoP-Nonce`` header):
the request is retried once with it, and later proofs to that origin carry the newest
nonce the server handed out. The nonces live in memory only.

Whether DPoP is used is the ``oauth.dpop`` setting (``DPOP_MODES`` in ``actors/auth``): ``auto`` (the
default) when the authorization server advertises ``dpop_signing_alg_values_supported``
with ES256, ``required`` (refuse an authorization server without it), ``off``.

The private key is a secret like a refresh token: it never appears in a log line, an
error or an event, and :meth:`~actors.auth.records.AuthRecord.secrets` names it for the
redactors.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ALGORITHM = "ES256"  # the one we sign with: P-256, what every DPoP server must accept
NONCE_ERROR = "use_dpop_nonce"
_MAX_NONCE = 1024  # a server's nonce longer than this is not echoed back


def wanted(mode: str, advertised: tuple[str, ...] | None) -> bool:
    """Use DPoP with this authorization server? Raises ValueError (the reason) when
    ``mode`` is ``required`` and the server does not offer ES256 proofs."""
    offered = advertised is not None and ALGORITHM in advertised
    if mode == "off":
        return False
    if mode == "required" and not offered:
        what = ", ".join(advertised) if advertised else "none"
        raise ValueError(
            f'"dpop": "required", but the authorization server accepts no {ALGORITHM} DPoP proofs '
            f"(dpop_signing_alg_values_supported: {what})"
        )
    return offered


def new_key() -> dict[str, Any]:
    """A fresh private key as a JWK (what the record stores)."""
    from joserfc.jwk import ECKey

    return dict(ECKey.generate_key("P-256").as_dict(private=True))


def key_secret(jwk: Mapping[str, Any]) -> str | None:
    """The private part of a stored key (``d``), for redactors."""
    value = jwk.get("d")
    return value if isinstance(value, str) and value else None


def htu(url: str) -> str:
    """The ``htu`` claim: the request URL without query and fragment (RFC 9449 §4.2)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class DPoPSigner:
    """The proofs of one server's client: its key, and the nonces servers handed out."""

    def __init__(
        self, jwk: Mapping[str, Any], clock: Callable[[], float], nonces: dict[str, str] | None = None
    ) -> None:
        from joserfc.jwk import ECKey

        self.jwk = jwk  # the stored private key (the record's); never shown
        self._key = ECKey.import_key(dict(jwk))
        self._public = dict(self._key.as_dict(private=False))
        self._clock = clock
        self._nonces = {} if nonces is None else nonces  # origin -> the newest nonce it sent

    def __repr__(self) -> str:  # never the key
        return f"DPoPSigner(jkt={self.thumbprint()})"

    def thumbprint(self) -> str:
        """The key's RFC 7638 thumbprint (what a bound token's ``cnf.jkt`` names)."""
        return str(self._key.thumbprint())

    def proof(self, method: str, url: str, access_token: str | None = None) -> str:
        """A fresh proof for one request (``ath`` when it carries ``access_token``)."""
        from joserfc import jwt

        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method.upper(),
            "htu": htu(url),
            "iat": int(self._clock()),
        }
        nonce = self._nonces.get(_origin(url))
        if nonce is not None:
            claims["nonce"] = nonce
        if access_token is not None:
            digest = hashlib.sha256(access_token.encode("ascii")).digest()
            claims["ath"] = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        header = {"typ": "dpop+jwt", "alg": ALGORITHM, "jwk": self._public}
        return jwt.encode(header, claims, self._key, algorithms=[ALGORITHM])

    def headers(self, method: str, url: str, access_token: str | None = None) -> dict[str, str]:
        return {"DPoP": self.proof(method, url, access_token)}

    def note_nonce(self, url: str, value: str | None) -> bool:
        """Remember a ``DPoP-Nonce`` a server sent; True when it is a new one (so a
        request refused with ``use_dpop_nonce`` is worth one retry)."""
        if not value or len(value) > _MAX_NONCE or not value.isascii() or not value.isprintable():
            return False
        origin = _origin(url)
        if self._nonces.get(origin) == value:
            return False
        self._nonces[origin] = value
        return True
