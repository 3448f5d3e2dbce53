"""A server's ``oauth`` config block, as the OAuth client reads it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

# Flows that need no person: run again whenever the token is gone or expired.
HEADLESS_FLOWS = ("client_credentials", "cross_app_access", "jwt_bearer")


@attrs.frozen
class OAuthSettings:
    """A server's ``oauth`` config block (every key optional)."""

    client_id: str | None = None
    client_secret: str | None = None
    scope: str | None = None
    flow: str = "authorization_code"
    # Client ID metadata document: our client's URL, used as client_id where the
    # authorization server supports it (instead of registering).
    client_metadata_url: str | None = None
    private_key: str | None = None  # PEM, for private_key_jwt
    signing_algorithm: str = "RS256"
    auth_method: str | None = None  # token_endpoint_auth_method for a configured client
    # cross_app_access (SEP-990, enterprise-managed): the identity provider's token
    # endpoint and client, and the user's ID token to exchange for an ID-JAG.
    idp_token_endpoint: str | None = None
    idp_client_id: str | None = None
    idp_client_secret: str | None = None
    id_token: str | None = None
    # DPoP (actors/auth/dpop.py): "auto" (when the authorization server offers it),
    # "required" or "off".
    dpop: str = "auto"
    # jwt_bearer (RFC 7523, workload identity): the platform's signed assertion, as a
    # value or as a file read again for every grant (actors/auth/jwt_bearer.py).
    assertion: str | None = None
    assertion_file: str | None = None
    # token_exchange (RFC 8693): a ``per_user`` server's authorization server accepts the
    # token a person signed in to us with as ``subject_token``; it is exchanged for one of
    # this server's before any browser sign-in is asked of them (actors/auth/grants.py).
    token_exchange: bool = False
    subject_token_type: str = "urn:ietf:params:oauth:token-type:access_token"

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> OAuthSettings:
        data = data or {}
        return cls(
            client_id=data.get("client_id") or None,
            client_secret=data.get("client_secret") or None,
            scope=data.get("scope") or None,
            flow=data.get("flow") or "authorization_code",
            client_metadata_url=data.get("client_metadata_url") or None,
            private_key=data.get("private_key") or None,
            signing_algorithm=data.get("signing_algorithm") or "RS256",
            auth_method=data.get("token_endpoint_auth_method") or None,
            idp_token_endpoint=data.get("idp_token_endpoint") or None,
            idp_client_id=data.get("idp_client_id") or None,
            idp_client_secret=data.get("idp_client_secret") or None,
            id_token=data.get("id_token") or None,
            dpop=data.get("dpop") or "auto",
            assertion=data.get("assertion") or None,
            assertion_file=data.get("assertion_file") or None,
            token_exchange=data.get("token_exchange") is True,
            subject_token_type=data.get("subject_token_type")
            or "urn:ietf:params:oauth:token-type:access_token",
        )
