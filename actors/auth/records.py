"""What an OAuth client remembers about one server, and how it is stored.

An :class:`AuthRecord` holds the registered (or configured) client, the endpoints found
by discovery, and the current tokens with their *absolute* expiry (unix seconds), so a
restart knows an access token is stale and uses the stored refresh token instead of
sending a dead token first. It round-trips through plain JSON for the store; unknown or
malformed stored records are dropped (a fresh login is the fix), never crash a start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from actors.auth.dpop import key_secret

# Refresh this long before the stated expiry: the request must not race the deadline.
EXPIRY_LEEWAY_S = 30.0
RECORD_VERSION = 1


@attrs.frozen
class Client:
    """A client at one authorization server: registered by us, or configured."""

    client_id: str
    client_secret: str | None = None
    auth_method: str | None = None  # token_endpoint_auth_method; None: pick from metadata
    redirect_uris: tuple[str, ...] = ()
    registered: bool = False  # by dynamic client registration (may be redone)


@attrs.frozen
class Tokens:
    """An access token and what came with it."""

    access_token: str
    token_type: str = "Bearer"
    expires_at: float | None = None  # unix seconds; None: not stated
    refresh_token: str | None = None
    scope: str | None = None
    lifetime: float | None = None  # the expires_in it was issued with

    def expired(self, now: float, leeway: float = EXPIRY_LEEWAY_S) -> bool:
        """Due for renewal: within ``leeway`` of the expiry, or within a quarter of its
        lifetime for short-lived tokens (a 20 s token is not renewed on every request)."""
        if self.expires_at is None:
            return False
        if self.lifetime is not None:
            leeway = min(leeway, self.lifetime / 4)
        return now >= self.expires_at - leeway

    @classmethod
    def from_response(
        cls, body: Mapping[str, Any], now: float, previous: Tokens | None = None, *, dpop: bool = False
    ) -> Tokens:
        """From a token endpoint's JSON answer. A refresh answer without a new refresh
        token keeps the old one (RFC 6749 §6); with one, the old is replaced (rotation).
        A ``DPoP`` token is taken only when the request carried a proof (``dpop``)."""
        access = body.get("access_token")
        if not isinstance(access, str) or not access:
            raise ValueError("the token response has no access_token")
        token_type = body.get("token_type")
        kind = token_type.lower() if isinstance(token_type, str) else None
        if kind != "bearer" and not (dpop and kind == "dpop"):
            wanted = "Bearer or DPoP" if dpop else "Bearer"
            raise ValueError(f"the token response's token_type is {token_type!r}, not {wanted}")
        expires_in = body.get("expires_in")
        if isinstance(expires_in, str) and expires_in.isdigit():
            expires_in = int(expires_in)
        lifetime = float(expires_in) if isinstance(expires_in, int | float) and expires_in > 0 else None
        expires_at = now + lifetime if lifetime is not None else None
        refresh = body.get("refresh_token")
        if not isinstance(refresh, str) or not refresh:
            refresh = previous.refresh_token if previous is not None else None
        scope = body.get("scope")
        if not isinstance(scope, str):
            scope = previous.scope if previous is not None else None
        return cls(access, "DPoP" if kind == "dpop" else "Bearer", expires_at, refresh, scope, lifetime)


@attrs.frozen
class AuthRecord:
    """Everything stored for one server (keyed by server name and URL)."""

    issuer: str = ""
    token_endpoint: str = ""
    authorization_endpoint: str | None = None
    registration_endpoint: str | None = None
    resource: str | None = None  # the RFC 8707 resource indicator; None for 2025-03-26 servers
    auth_methods_supported: tuple[str, ...] | None = None
    client: Client | None = None
    tokens: Tokens | None = None
    # DPoP (actors/auth/dpop.py): the private key as a JWK; None when DPoP is not used.
    dpop_key: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = attrs.asdict(self, recurse=True, value_serializer=_tuple_to_list)
        data["version"] = RECORD_VERSION
        return data

    @classmethod
    def from_json(cls, data: Any) -> AuthRecord | None:
        """The stored record, or None if it is from another version or malformed."""
        if not isinstance(data, Mapping) or data.get("version") != RECORD_VERSION:
            return None
        try:
            client = data.get("client")
            tokens = data.get("tokens")
            methods = data.get("auth_methods_supported")
            key = data.get("dpop_key")
            return cls(
                issuer=str(data.get("issuer") or ""),
                token_endpoint=str(data.get("token_endpoint") or ""),
                authorization_endpoint=_opt(data.get("authorization_endpoint")),
                registration_endpoint=_opt(data.get("registration_endpoint")),
                resource=_opt(data.get("resource")),
                auth_methods_supported=tuple(methods) if isinstance(methods, list) else None,
                client=(
                    Client(
                        client_id=_required(client["client_id"]),
                        client_secret=_opt(client.get("client_secret")),
                        auth_method=_opt(client.get("auth_method")),
                        redirect_uris=_str_tuple(client.get("redirect_uris") or []),
                        registered=bool(client.get("registered")),
                    )
                    if isinstance(client, Mapping)
                    else None
                ),
                tokens=(
                    Tokens(
                        access_token=_required(tokens["access_token"]),
                        token_type="DPoP" if tokens.get("token_type") == "DPoP" else "Bearer",
                        expires_at=_number(tokens.get("expires_at")),
                        refresh_token=_opt(tokens.get("refresh_token")),
                        scope=_opt(tokens.get("scope")),
                        lifetime=_number(tokens.get("lifetime")),
                    )
                    if isinstance(tokens, Mapping)
                    else None
                ),
                dpop_key=dict(key) if isinstance(key, Mapping) and key_secret(key) else None,
            )
        except (KeyError, TypeError, ValueError):
            return None

    def secrets(self) -> tuple[str, ...]:
        """Values that must never be shown (for redactors)."""
        values = []
        if self.client is not None and self.client.client_secret:
            values.append(self.client.client_secret)
        if self.tokens is not None:
            values.append(self.tokens.access_token)
            if self.tokens.refresh_token:
                values.append(self.tokens.refresh_token)
        if self.dpop_key is not None and (private := key_secret(self.dpop_key)):
            values.append(private)
        return tuple(values)


def _tuple_to_list(_instance: Any, _field: Any, value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _opt(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _required(value: Any) -> str:
    """A stored string that must be there (str(None) must not become a token)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"not a non-empty string: {type(value).__name__}")
    return value


def _str_tuple(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("not a list of strings")
    return tuple(value)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
