"""The OAuth 2.1 grants of one server's client, and the record they fill.

:class:`OAuthFlows` runs the steps; :class:`~actors.auth.provider.OAuthProvider`
decides when (and holds the lock). The steps:

- discovery: the protected-resource metadata, then the authorization server's (a
  2025-03-26 server without the former: its own origin, or the default endpoints);
- a client: configured, a client ID metadata document, the stored registration, or
  dynamic client registration;
- a grant: authorization code with PKCE (through the host's authorizer), or first, for
  a person signed in through an identity provider the server trusts, token exchange
  (RFC 8693); client credentials, cross-app access (SEP-990: an ID-JAG from the
  identity provider), or a workload's JWT-bearer assertion (RFC 7523); the forms of
  those without a browser are :mod:`actors.auth.grants`;
- the token request, with the client authentication the server supports (basic,
  post or a signed ``private_key_jwt`` assertion), and the refresh grant; with DPoP
  (:mod:`actors.auth.dpop`) each carries a proof of the server's key pair.

Mechanics come from authlib (PKCE, the authorization URL, the callback's ``state``
check, signed assertions), imported when a flow needs them. Each new token is saved
to the vault at once; a vault that fails is logged, and the token still serves this run.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import attrs
import httpx2

from actors.auth import dpop
from actors.auth.authorizers import Authorizer
from actors.auth.discovery import (
    Challenge,
    DiscoveryError,
    ResourceMetadata,
    ServerMetadata,
    application_type,
    canonical_resource,
    check_metadata_issuer,
    check_response_issuer,
    legacy_endpoints,
    legacy_metadata_url,
    pick_auth_method,
    resource_allowed,
    resource_metadata_urls,
    response_iss,
    same_issuer,
    select_scope,
    server_metadata_urls,
)
from actors.auth.errors import auth_failed, needs_login
from actors.auth.grants import TOKEN_EXCHANGE, exchange_form, headless_form
from actors.auth.http import AuthServerHttp
from actors.auth.records import AuthRecord, Client, Tokens
from actors.auth.settings import HEADLESS_FLOWS, OAuthSettings
from actors.auth.vault import TokenVault
from actors.log_events import get_logger
from actors.protocol.http_framing import USER_AGENT
from actors.redaction import safe_url
from actors.transport_errors import AuthRequired

_log = get_logger("actors.auth")

JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class OAuthFlows:
    """The grants for one server; ``record`` is what they found and got so far."""

    def __init__(
        self,
        server: str,
        url: str,
        settings: OAuthSettings,
        vault: TokenVault,
        authorizer: Authorizer | None,
        *,
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.time,
        transport: httpx2.AsyncBaseTransport | None = None,
        subject_token: Callable[[], str | None] | None = None,
    ) -> None:
        self.server = server
        self.subject_token = subject_token
        """The person's inbound access token now, for token exchange (None: no person)."""
        self.url = url
        self.settings = settings
        self.authorizer = authorizer
        self.record = AuthRecord()
        self._vault = vault
        self._clock = clock
        self._http = AuthServerHttp(server, timeout_s=timeout_s, transport=transport)
        self._signer: dpop.DPoPSigner | None = None
        self._nonces: dict[str, str] = {}  # DPoP nonces by origin: kept across signers

    def signer(self) -> dpop.DPoPSigner | None:
        """The DPoP proofs of the record's key, or None when DPoP is not in use."""
        key = self.record.dpop_key
        if key is None:
            return None
        if self._signer is None or self._signer.jwk is not key:
            self._signer = dpop.DPoPSigner(key, self._clock, self._nonces)
        return self._signer

    async def load(self) -> None:
        try:
            stored = await self._vault.load(self.server, self.url)
        except Exception as exc:  # the store is ours; its failure must not fail the server
            _log.warning(
                "cannot read stored tokens", extra={"fields": {"server": self.server, "reason": str(exc)}}
            )
            return
        record = AuthRecord.from_json(stored) if stored is not None else None
        if record is not None:
            self.record = record

    async def _save(self) -> None:
        """Store the record; if the store fails, the tokens still serve this run."""
        try:
            await self._vault.save(self.server, self.url, self.record.to_json())
        except Exception as exc:
            _log.warning("cannot store tokens", extra={"fields": {"server": self.server, "reason": str(exc)}})

    async def renew_unattended(self, tokens: Tokens | None) -> None:
        """A new token without a person, if one can be had: the refresh token, else a
        headless flow's grant again."""
        if tokens is not None and tokens.refresh_token and await self.refresh():
            return
        if self.settings.token_exchange and self.record.token_endpoint:
            async with self._http.client() as http:
                if await self.exchange(
                    http, (tokens.scope if tokens is not None else None) or self.settings.scope
                ):
                    return
        if self.settings.flow in HEADLESS_FLOWS and self.record.token_endpoint:
            scope = (tokens.scope if tokens is not None else None) or self.settings.scope
            async with self._http.client() as http:
                await self._headless_grant(http, scope)

    async def full_flow(self, challenge: Challenge | None, scope_hint: str | None) -> None:
        """Discovery, a client, a grant; the record saved. Raises AuthRequired."""
        async with self._http.client() as http:
            resource, metadata = await self._discover(http, challenge)
            self._forget_other_issuer(metadata.issuer)
            scope = scope_hint or select_scope(
                self.settings.scope,
                challenge,
                resource,
                metadata,
                want_refresh=self.settings.flow == "authorization_code",
            )
            self.record = attrs.evolve(
                self.record,
                issuer=metadata.issuer,
                token_endpoint=metadata.token_endpoint,
                authorization_endpoint=metadata.authorization_endpoint,
                registration_endpoint=metadata.registration_endpoint,
                resource=canonical_resource(resource.resource) if resource is not None else None,
                auth_methods_supported=metadata.token_endpoint_auth_methods_supported,
                tokens=None,
                dpop_key=self._dpop_key(metadata),
            )
            client = await self._client(http, metadata)
            self.record = attrs.evolve(self.record, client=client)
            if self.settings.flow in HEADLESS_FLOWS:
                await self._headless_grant(http, scope)
                return
            if await self.exchange(http, scope):
                return
            await self._authorization_code(http, metadata, client, scope)

    async def moved(self, challenge: Challenge | None) -> bool:
        """Does the server's protected-resource metadata now name another authorization
        server than the one our tokens are from? Asked before a refresh after a 401, so a
        refresh token of the old server is not used (SEP-2352). No metadata: not moved."""
        if not self.record.issuer:
            return False
        async with self._http.client() as http:
            try:
                for where in resource_metadata_urls(self.url, challenge):
                    body = await self._http.get_json(http, where, "protected-resource metadata")
                    if body is not None:
                        named = ResourceMetadata.parse(body, where).authorization_servers[0]
                        return not same_issuer(named, self.record.issuer)
            except DiscoveryError:
                return False  # the full flow reports it, if it comes to that
        return False

    def _forget_other_issuer(self, issuer: str) -> None:
        """The server now names another authorization server (SEP-2352): the client
        registered at the old one and its tokens are not used there (credentials are not
        portable between issuers); registration and the grant run again."""
        previous = self.record.issuer
        if not previous or same_issuer(previous, issuer):
            return
        _log.info(
            "authorization server changed",
            extra={"fields": {"server": self.server, "from": safe_url(previous), "to": safe_url(issuer)}},
        )
        client = self.record.client
        self.record = attrs.evolve(
            self.record, client=None if client is not None and client.registered else client, tokens=None
        )

    def _dpop_key(self, metadata: ServerMetadata) -> dict[str, Any] | None:
        """The key pair to bind tokens to (the stored one, else a new one), or None."""
        try:
            use = dpop.wanted(self.settings.dpop, metadata.dpop_signing_alg_values_supported)
        except ValueError as exc:
            raise auth_failed(self.server, str(exc)) from None
        return (self.record.dpop_key or dpop.new_key()) if use else None

    async def _discover(
        self, http: httpx2.AsyncClient, challenge: Challenge | None
    ) -> tuple[ResourceMetadata | None, ServerMetadata]:
        try:
            resource: ResourceMetadata | None = None
            for where in resource_metadata_urls(self.url, challenge):
                body = await self._http.get_json(http, where, "protected-resource metadata")
                if body is not None:
                    resource = ResourceMetadata.parse(body, where)
                    break
            if resource is None:  # a 2025-03-26 server: the AS is the server's origin
                where = legacy_metadata_url(self.url)
                body = await self._http.get_json(http, where, "authorization server metadata")
                if body is not None:
                    return None, ServerMetadata.parse(body, where)
                return None, ServerMetadata.parse(legacy_endpoints(self.url), self.url)
            if not resource_allowed(self.url, resource.resource):
                raise DiscoveryError(
                    f"its protected-resource metadata is for {safe_url(resource.resource)}, "
                    f"not {safe_url(self.url)}; no token is sent to it"
                )
            issuer = resource.authorization_servers[0]
            for where in server_metadata_urls(issuer):
                body = await self._http.get_json(http, where, "authorization server metadata")
                if body is not None:
                    metadata = ServerMetadata.parse(body, where)
                    check_metadata_issuer(metadata, issuer, where)
                    metadata.check_pkce()
                    return resource, metadata
            raise DiscoveryError(f"no authorization server metadata found for {safe_url(issuer)}")
        except DiscoveryError as exc:
            raise auth_failed(self.server, str(exc)) from None

    async def _client(self, http: httpx2.AsyncClient, metadata: ServerMetadata) -> Client:
        settings = self.settings
        if settings.client_id:
            return Client(settings.client_id, settings.client_secret, settings.auth_method)
        if settings.client_metadata_url and metadata.client_id_metadata_document_supported:
            return Client(settings.client_metadata_url, None, "none")
        redirect = self.authorizer.redirect_uri if self.authorizer is not None else None
        stored = self.record.client
        if (
            stored is not None
            and stored.registered
            and (settings.flow == "client_credentials" or redirect in (*stored.redirect_uris, None))
        ):
            return stored
        if metadata.registration_endpoint is None:
            raise auth_failed(
                self.server,
                "the authorization server offers no dynamic client registration; "
                'configure "oauth": {"client_id": ..., "client_secret": ...}',
            )
        if settings.flow == "authorization_code" and redirect is None and not self._subject():
            raise needs_login(self.server)
        return await self._register(http, metadata.registration_endpoint, redirect)

    async def _register(self, http: httpx2.AsyncClient, endpoint: str, redirect: str | None) -> Client:
        code_flow = self.settings.flow == "authorization_code"
        grants = ["authorization_code", "refresh_token"] if code_flow and redirect else []
        grants += [] if code_flow else ["client_credentials"]
        grants += [TOKEN_EXCHANGE] if self.settings.token_exchange else []  # no redirect: exchange only
        body: dict[str, Any] = {
            "client_name": USER_AGENT,
            "redirect_uris": [redirect] if redirect else [],
            "grant_types": grants,
            "response_types": ["code"] if code_flow and redirect else [],
            "token_endpoint_auth_method": "none" if code_flow else "client_secret_basic",
            "application_type": application_type(redirect),
        }
        answer = await self._http.post(http, endpoint, "client registration", json=body)
        client_id = answer.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise auth_failed(self.server, "client registration answered without a client_id")
        secret = answer.get("client_secret")
        method = answer.get("token_endpoint_auth_method")
        return Client(
            client_id,
            secret if isinstance(secret, str) and secret else None,
            method if isinstance(method, str) and method else None,
            redirect_uris=(redirect,) if redirect else (),
            registered=True,
        )

    async def _authorization_code(
        self, http: httpx2.AsyncClient, metadata: ServerMetadata, client: Client, scope: str | None
    ) -> None:
        from authlib.common.security import generate_token
        from authlib.oauth2.rfc6749.errors import OAuth2Error
        from authlib.oauth2.rfc6749.parameters import parse_authorization_code_response, prepare_grant_uri
        from authlib.oauth2.rfc7636 import create_s256_code_challenge

        if self.authorizer is None:
            raise needs_login(self.server)
        if metadata.authorization_endpoint is None:
            raise auth_failed(self.server, "the authorization server metadata has no authorization_endpoint")
        verifier = generate_token(64)
        state = generate_token(32)
        extra: dict[str, str] = {"code_challenge": create_s256_code_challenge(verifier)}
        extra["code_challenge_method"] = "S256"
        if self.record.resource:
            extra["resource"] = self.record.resource
        url = prepare_grant_uri(
            metadata.authorization_endpoint,
            client.client_id,
            "code",
            redirect_uri=self.authorizer.redirect_uri,
            scope=scope,
            state=state,
            **extra,
        )
        try:
            callback = await self.authorizer.authorize(self.server, url)
        except Exception as exc:  # the host's or our authorizer: its text names no secret
            raise auth_failed(self.server, f"no authorization: {exc}") from None
        try:  # RFC 9207 §2.4: the issuer first, before anything else of the response is used
            check_response_issuer(metadata.issuer, metadata.iss_parameter_supported, response_iss(callback))
        except DiscoveryError as exc:
            raise auth_failed(self.server, str(exc)) from None
        try:
            answer = parse_authorization_code_response(callback, state=state)
        except OAuth2Error as exc:
            what = "the state did not match (possible CSRF)" if "state" in str(exc.error) else exc.error
            raise auth_failed(self.server, f"the authorization callback was refused: {what}") from None
        form = {
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": self.authorizer.redirect_uri,
            "code_verifier": verifier,
        }
        await self._token_request(http, form, None)

    async def _headless_grant(self, http: httpx2.AsyncClient, scope: str | None) -> None:
        """Client credentials, cross-app access or a workload's JWT: a token without a person."""
        if self.record.client is None:
            raise auth_failed(
                self.server, f'the {self.settings.flow} flow needs "client_id" (and a secret or key)'
            )
        form = await headless_form(self.server, self.url, self.settings, self.record, self._http, http, scope)
        await self._token_request(http, form, None)

    def _subject(self) -> str | None:
        """The token to exchange now, with exchange on and a person who has one."""
        if not self.settings.token_exchange or self.subject_token is None:
            return None
        return self.subject_token()

    async def exchange(self, http: httpx2.AsyncClient, scope: str | None) -> bool:
        """RFC 8693: the person's own token from the identity provider they signed in
        with, exchanged for one of this server's, so they need no second sign-in. False
        (nothing changed) when exchange is off, there is no such token, or the
        authorization server refuses it: then the person signs in as usual."""
        subject = self.subject_token() if self.subject_token is not None else None
        if not (
            self.settings.token_exchange and subject and self.record.client and self.record.token_endpoint
        ):
            return False
        try:
            await self._token_request(
                http, exchange_form(subject, self.settings.subject_token_type, scope), None
            )
        except AuthRequired as exc:
            fields = {"server": self.server, "reason": str(exc)}
            _log.warning("token exchange refused: the person signs in instead", extra={"fields": fields})
            return False
        return True

    async def refresh(self) -> bool:
        """Use the refresh token; False (tokens dropped) when the server refuses it."""
        tokens = self.record.tokens
        if tokens is None or not tokens.refresh_token or not self.record.token_endpoint:
            return False
        form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
        try:
            async with self._http.client() as http:
                await self._token_request(http, form, tokens)
        except AuthRequired:
            self.record = attrs.evolve(self.record, tokens=None)
            await self._save()
            return False
        return True

    async def _token_request(
        self, http: httpx2.AsyncClient, form: dict[str, str], previous: Tokens | None
    ) -> None:
        record = self.record
        client = record.client
        if client is None:
            raise auth_failed(self.server, "no client for the token request")
        if record.resource:
            form["resource"] = record.resource
        headers: dict[str, str] = {"Accept": "application/json"}
        method = pick_auth_method(
            client.auth_method, bool(client.client_secret), record.auth_methods_supported,
            has_key=bool(self.settings.private_key),
        )  # fmt: skip
        if method == "client_secret_basic" and client.client_secret:
            pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        elif method == "client_secret_post" and client.client_secret:
            form["client_id"] = client.client_id
            form["client_secret"] = client.client_secret
        else:
            form["client_id"] = client.client_id
        signed = method == "private_key_jwt" and bool(self.settings.private_key)

        def body() -> dict[str, str]:  # a fresh client assertion for every attempt
            if not signed:
                return form
            assertion = self._assertion(client.client_id)
            return {**form, "client_assertion_type": JWT_BEARER_ASSERTION, "client_assertion": assertion}

        signer = self.signer()
        answer = await self._http.post(
            http, record.token_endpoint, "the token request", form=body, headers=headers, proof=signer
        )
        try:
            tokens = Tokens.from_response(answer, self._clock(), previous, dpop=signer is not None)
        except ValueError as exc:
            raise auth_failed(self.server, str(exc)) from None
        self.record = attrs.evolve(self.record, tokens=tokens)
        await self._save()

    def _assertion(self, client_id: str) -> str:
        from authlib.oauth2.rfc7523 import private_key_jwt_sign

        audience = self.record.issuer or self.record.token_endpoint
        signed = private_key_jwt_sign(
            self.settings.private_key, client_id, audience, alg=self.settings.signing_algorithm
        )
        return signed.decode() if isinstance(signed, bytes) else str(signed)
