"""The OAuth 2.1 client of one remote server: what the ``authenticate`` state runs.

An :class:`OAuthProvider` lives as long as the supervisor (one per server, kept by the
remote connector across reconnects) and gives the HTTP transport three things:

- :meth:`prepare` — the ``authenticate`` state: load the stored record, refresh an
  access token that expired (also one that expired while we were not running: the
  expiry is stored as an absolute time), or run the client-credentials grant;
- :meth:`authorization` — the ``Authorization`` header value for the next request;
- :meth:`unauthorized` / :meth:`insufficient_scope` — a 401 or a 403
  ``insufficient_scope`` came back: refresh (or run the whole flow: discovery,
  registration, authorization, token), so the caller can retry **once**; when nothing
  can help, raise :class:`~actors.transports.base.AuthRequired` with ``needs_login``,
  which parks the server in the ``needs_auth`` condition instead of a retry loop.

Mechanics come from authlib (PKCE, the authorization URL, the callback's ``state``
check, signed ``private_key_jwt`` assertions); the requests go through httpx2, the
client the transports already use (authlib's own async client is tied to httpx).

Tokens never appear in an error text or a log line: texts name the server and the step
and carry at most the authorization server's ``error`` code.
"""

from __future__ import annotations

import base64
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import quote

import attrs
import httpx2
import orjson
import trio

from actors.auth.discovery import (
    Challenge,
    DiscoveryError,
    ResourceMetadata,
    ServerMetadata,
    canonical_resource,
    legacy_endpoints,
    legacy_metadata_url,
    merge_scopes,
    parse_challenge,
    pick_auth_method,
    resource_allowed,
    resource_metadata_urls,
    select_scope,
    server_metadata_urls,
)
from actors.auth.records import AuthRecord, Client, Tokens
from actors.redaction import safe_url
from actors.transports.base import USER_AGENT, AuthRequired, TransportClosed

_log = logging.getLogger("actors.auth")

# Flows that need no person: run again whenever the token is gone or expired.
HEADLESS_FLOWS = ("client_credentials", "cross_app_access")
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
MAX_METADATA_BYTES = 256 * 1024  # any answer of an authorization server (metadata, tokens)
# A server that keeps asking for more scope after this many step-ups is looping.
MAX_STEP_UPS = 2
_ERROR_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}\Z")
JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class Authorizer(Protocol):
    """Gets a user's consent: opens (or prints) the authorization URL and returns the
    URL the browser was sent back to (with ``code`` and ``state``)."""

    @property
    def redirect_uri(self) -> str: ...

    async def authorize(self, server: str, url: str) -> str: ...


class TokenVault(Protocol):
    """Where records are kept (the store's ``oauth`` table, file mode 0600)."""

    async def load(self, server: str, url: str) -> Mapping[str, Any] | None: ...

    async def save(self, server: str, url: str, record: Mapping[str, Any] | None) -> None: ...


class MemoryVault:
    """A vault for embedding without a state directory, and for tests."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], Mapping[str, Any]] = {}

    async def load(self, server: str, url: str) -> Mapping[str, Any] | None:
        return self.records.get((server, url))

    async def save(self, server: str, url: str, record: Mapping[str, Any] | None) -> None:
        if record is None:
            self.records.pop((server, url), None)
        else:
            self.records[(server, url)] = record


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
        )


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
    ) -> None:
        self.server = server
        self.url = url
        self.settings = settings
        self._vault = vault
        self.authorizer = authorizer
        self._timeout_s = timeout_s
        self._clock = clock
        self._transport = transport
        self._record = AuthRecord()
        self._lock = trio.Lock()
        self._step_ups = 0
        self._refused = False  # a fresh token was refused: renewing again is pointless

    # ----------------------------------------------------------------- transport API

    def authorization(self) -> str | None:
        """The ``Authorization`` header value, or None before the first token."""
        tokens = self._record.tokens
        return None if tokens is None else f"Bearer {tokens.access_token}"

    async def prepare(self) -> None:
        """The ``authenticate`` state: have a token ready if one can be had without a
        person. With none, the first request goes without and its 401 starts the flow."""
        async with self._lock:
            self._refused = False  # a new attempt (e.g. a restart after `auth login`)
            await self._load()
            tokens = self._record.tokens
            if tokens is None or tokens.expired(self._clock()):
                await self._renew_unattended(tokens)

    def expired(self) -> bool:
        """Is the current access token past its expiry (with the leeway)? Cheap: the
        transport asks before every request."""
        tokens = self._record.tokens
        return tokens is not None and tokens.expired(self._clock())

    async def renew(self) -> None:
        """Before a request: an access token that expired during the session is
        refreshed (or re-granted by a headless flow) instead of being sent to die. When
        a refresh is refused, the request goes as it is and its 401 takes the usual path."""
        async with self._lock:
            tokens = self._record.tokens
            if tokens is None or not tokens.expired(self._clock()) or self._refused:
                return  # renewed meanwhile by another request, or nothing to renew
            await self._renew_unattended(tokens)

    async def _renew_unattended(self, tokens: Tokens | None) -> None:
        """A new token without a person, if one can be had: the refresh token, else a
        headless flow's grant again. (Called with the lock held.)"""
        if tokens is not None and tokens.refresh_token and await self._refresh():
            return
        if self.settings.flow in HEADLESS_FLOWS and self._record.token_endpoint:
            scope = (tokens.scope if tokens is not None else None) or self.settings.scope
            async with self._http() as http:
                await self._headless_grant(http, scope)

    async def unauthorized(self, used: str | None, header: str | None) -> None:
        """A request with ``used`` (an Authorization value, or None) got a 401: get a
        new token so the caller may retry once, or raise AuthRequired."""
        async with self._lock:
            if self._refused:
                raise self._failed("the server refused a fresh token")
            if used is not None and self.authorization() not in (None, used):
                return  # another request renewed it meanwhile: just retry
            challenge = parse_challenge(header)
            tokens = self._record.tokens
            if used is not None and tokens is not None and tokens.refresh_token and await self._refresh():
                return
            await self._full_flow(challenge, scope_hint=None)

    async def insufficient_scope(self, used: str | None, header: str | None) -> None:
        """A 403 ``insufficient_scope``: authorize again with the union of scopes
        (step-up), at most ``MAX_STEP_UPS`` times in a row."""
        async with self._lock:
            if used is not None and self.authorization() not in (None, used):
                return
            challenge = parse_challenge(header)
            if self._step_ups >= MAX_STEP_UPS:
                raise self._failed("the server keeps asking for more scope (step-up limit reached)")
            self._step_ups += 1
            current = self._record.tokens.scope if self._record.tokens else None
            wanted = merge_scopes(current, challenge.scope if challenge else None)
            await self._full_flow(challenge, scope_hint=wanted)

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
            await self._load()
            await self._full_flow(parse_challenge(header), scope_hint=None)  # it drops the tokens

    # -------------------------------------------------------------------- the flow

    async def _load(self) -> None:
        try:
            stored = await self._vault.load(self.server, self.url)
        except Exception as exc:  # the store is ours; its failure must not fail the server
            _log.warning(
                "cannot read stored tokens", extra={"fields": {"server": self.server, "reason": str(exc)}}
            )
            return
        record = AuthRecord.from_json(stored) if stored is not None else None
        if record is not None:
            self._record = record

    async def _save(self) -> None:
        """Store the record; if the store fails, the tokens still serve this run."""
        try:
            await self._vault.save(self.server, self.url, self._record.to_json())
        except Exception as exc:
            _log.warning("cannot store tokens", extra={"fields": {"server": self.server, "reason": str(exc)}})

    async def _full_flow(self, challenge: Challenge | None, scope_hint: str | None) -> None:
        """Discovery, a client, a grant; the record saved. Raises AuthRequired."""
        async with self._http() as http:
            resource, metadata = await self._discover(http, challenge)
            scope = scope_hint or select_scope(
                self.settings.scope,
                challenge,
                resource,
                metadata,
                want_refresh=self.settings.flow == "authorization_code",
            )
            self._record = attrs.evolve(
                self._record,
                issuer=metadata.issuer,
                token_endpoint=metadata.token_endpoint,
                authorization_endpoint=metadata.authorization_endpoint,
                registration_endpoint=metadata.registration_endpoint,
                resource=canonical_resource(resource.resource) if resource is not None else None,
                auth_methods_supported=metadata.token_endpoint_auth_methods_supported,
                tokens=None,
            )
            client = await self._client(http, metadata)
            self._record = attrs.evolve(self._record, client=client)
            if self.settings.flow in HEADLESS_FLOWS:
                await self._headless_grant(http, scope)
                return
            await self._authorization_code(http, metadata, client, scope)

    async def _discover(
        self, http: httpx2.AsyncClient, challenge: Challenge | None
    ) -> tuple[ResourceMetadata | None, ServerMetadata]:
        try:
            resource: ResourceMetadata | None = None
            for where in resource_metadata_urls(self.url, challenge):
                body = await self._get_json(http, where, "protected-resource metadata")
                if body is not None:
                    resource = ResourceMetadata.parse(body, where)
                    break
            if resource is None:  # a 2025-03-26 server: the AS is the server's origin
                where = legacy_metadata_url(self.url)
                body = await self._get_json(http, where, "authorization server metadata")
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
                body = await self._get_json(http, where, "authorization server metadata")
                if body is not None:
                    metadata = ServerMetadata.parse(body, where)
                    if not metadata.issuer:
                        metadata = attrs.evolve(metadata, issuer=issuer)
                    metadata.check_pkce()
                    return resource, metadata
            raise DiscoveryError(f"no authorization server metadata found for {safe_url(issuer)}")
        except DiscoveryError as exc:
            raise self._failed(str(exc)) from None

    async def _client(self, http: httpx2.AsyncClient, metadata: ServerMetadata) -> Client:
        settings = self.settings
        if settings.client_id:
            return Client(settings.client_id, settings.client_secret, settings.auth_method)
        if settings.client_metadata_url and metadata.client_id_metadata_document_supported:
            return Client(settings.client_metadata_url, None, "none")
        redirect = self.authorizer.redirect_uri if self.authorizer is not None else None
        stored = self._record.client
        if (
            stored is not None
            and stored.registered
            and (settings.flow == "client_credentials" or redirect in stored.redirect_uris)
        ):
            return stored
        if metadata.registration_endpoint is None:
            raise self._failed(
                "the authorization server offers no dynamic client registration; "
                'configure "oauth": {"client_id": ..., "client_secret": ...}'
            )
        if settings.flow == "authorization_code" and redirect is None:
            raise self._needs_login()
        return await self._register(http, metadata.registration_endpoint, redirect)

    async def _register(self, http: httpx2.AsyncClient, endpoint: str, redirect: str | None) -> Client:
        code_flow = self.settings.flow == "authorization_code"
        body: dict[str, Any] = {
            "client_name": USER_AGENT,
            "redirect_uris": [redirect] if redirect else [],
            "grant_types": ["authorization_code", "refresh_token"] if code_flow else ["client_credentials"],
            "response_types": ["code"] if code_flow else [],
            "token_endpoint_auth_method": "none" if code_flow else "client_secret_basic",
        }
        answer = await self._post(http, endpoint, "client registration", json=body)
        client_id = answer.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise self._failed("client registration answered without a client_id")
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
            raise self._needs_login()
        if metadata.authorization_endpoint is None:
            raise self._failed("the authorization server metadata has no authorization_endpoint")
        verifier = generate_token(64)
        state = generate_token(32)
        extra: dict[str, str] = {"code_challenge": create_s256_code_challenge(verifier)}
        extra["code_challenge_method"] = "S256"
        if self._record.resource:
            extra["resource"] = self._record.resource
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
            raise self._failed(f"no authorization: {exc}") from None
        try:
            answer = parse_authorization_code_response(callback, state=state)
        except OAuth2Error as exc:
            what = "the state did not match (possible CSRF)" if "state" in str(exc.error) else exc.error
            raise self._failed(f"the authorization callback was refused: {what}") from None
        form = {
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": self.authorizer.redirect_uri,
            "code_verifier": verifier,
        }
        await self._token_request(http, form, None)

    async def _headless_grant(self, http: httpx2.AsyncClient, scope: str | None) -> None:
        """Client credentials, or cross-app access: a token without a person."""
        if self._record.client is None:
            raise self._failed(f'the {self.settings.flow} flow needs "client_id" (and a secret or key)')
        if self.settings.flow == "cross_app_access":
            form = {"grant_type": JWT_BEARER_GRANT, "assertion": await self._id_jag(http, scope)}
        else:
            form = {"grant_type": "client_credentials"}
        if scope:
            form["scope"] = scope
        await self._token_request(http, form, None)

    async def _id_jag(self, http: httpx2.AsyncClient, scope: str | None) -> str:
        """SEP-990: exchange the user's ID token at the identity provider (RFC 8693) for
        an identity assertion grant (ID-JAG) addressed to this authorization server."""
        settings = self.settings
        if not settings.idp_token_endpoint or not settings.id_token:
            raise self._failed('cross_app_access needs "idp_token_endpoint" and "id_token"')
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG_TYPE,
            "subject_token": settings.id_token,
            "subject_token_type": ID_TOKEN_TYPE,
            "audience": self._record.issuer or self._record.token_endpoint,
            "resource": self._record.resource or canonical_resource(self.url),
        }
        if scope:
            form["scope"] = scope
        if settings.idp_client_id:
            form["client_id"] = settings.idp_client_id
        if settings.idp_client_secret:
            form["client_secret"] = settings.idp_client_secret
        doing = "the token exchange at the identity provider"
        answer = await self._post(http, settings.idp_token_endpoint, doing, data=form)
        assertion = answer.get("access_token")
        if not isinstance(assertion, str) or not assertion:
            raise self._failed("the identity provider's token exchange answered without a token")
        return assertion

    async def _refresh(self) -> bool:
        """Use the refresh token; False (tokens dropped) when the server refuses it."""
        tokens = self._record.tokens
        if tokens is None or not tokens.refresh_token or not self._record.token_endpoint:
            return False
        form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
        try:
            async with self._http() as http:
                await self._token_request(http, form, tokens)
        except AuthRequired:
            self._record = attrs.evolve(self._record, tokens=None)
            await self._save()
            return False
        return True

    async def _token_request(
        self, http: httpx2.AsyncClient, form: dict[str, str], previous: Tokens | None
    ) -> None:
        record = self._record
        client = record.client
        if client is None:
            raise self._failed("no client for the token request")
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
        elif method == "private_key_jwt" and self.settings.private_key:
            form["client_id"] = client.client_id
            form["client_assertion_type"] = JWT_BEARER_ASSERTION
            form["client_assertion"] = self._assertion(client.client_id)
        else:
            form["client_id"] = client.client_id
        answer = await self._post(
            http, record.token_endpoint, "the token request", data=form, headers=headers
        )
        try:
            tokens = Tokens.from_response(answer, self._clock(), previous)
        except ValueError as exc:
            raise self._failed(str(exc)) from None
        self._record = attrs.evolve(self._record, tokens=tokens)
        await self._save()

    def _assertion(self, client_id: str) -> str:
        from authlib.oauth2.rfc7523 import private_key_jwt_sign

        audience = self._record.issuer or self._record.token_endpoint
        signed = private_key_jwt_sign(
            self.settings.private_key, client_id, audience, alg=self.settings.signing_algorithm
        )
        return signed.decode() if isinstance(signed, bytes) else str(signed)

    # --------------------------------------------------------------------- HTTP

    def _http(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            follow_redirects=False,
            timeout=self._timeout_s,
            headers={"User-Agent": USER_AGENT},
            transport=self._transport,
        )

    async def _get_json(self, http: httpx2.AsyncClient, url: str, what: str) -> Any | None:
        """A metadata document, or None when it is not there (any 4xx, too big, not JSON)."""
        status, content = await self._fetch(http, "GET", url, what, headers={"Accept": "application/json"})
        if status >= 500:
            where = safe_url(url)
            raise TransportClosed(f"mcp server {self.server}: {what} at {where} answered HTTP {status}")
        if status != 200 or content is None:
            return None
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError:
            return None

    async def _post(self, http: httpx2.AsyncClient, url: str, what: str, **kwargs: Any) -> dict[str, Any]:
        status, content = await self._fetch(http, "POST", url, what, **kwargs)
        try:
            body = None if content is None else orjson.loads(content) if content else {}
        except orjson.JSONDecodeError:
            body = None
        if status >= 500:
            raise TransportClosed(f"mcp server {self.server}: {what} answered HTTP {status}")
        if not 200 <= status < 300 or not isinstance(body, dict):
            code = body.get("error") if isinstance(body, dict) else None
            reason = code if isinstance(code, str) and _ERROR_CODE.match(code) else "no usable answer"
            raise self._failed(f"{what} was refused: HTTP {status} ({reason})")
        return body

    async def _fetch(
        self, http: httpx2.AsyncClient, method: str, url: str, what: str, **kwargs: Any
    ) -> tuple[int, bytes | None]:
        """Status and body; the body is None past ``MAX_METADATA_BYTES``, and is not read
        further: an authorization server is as untrusted as any other peer."""
        try:
            async with http.stream(method, url, **kwargs) as response:
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_METADATA_BYTES:
                        return response.status_code, None
                    chunks.append(chunk)
                return response.status_code, b"".join(chunks)
        except httpx2.HTTPError as exc:
            raise TransportClosed(f"mcp server {self.server}: {what} failed: {type(exc).__name__}") from None

    # ------------------------------------------------------------------- errors

    def _failed(self, detail: str) -> AuthRequired:
        _log.warning("authorization failed", extra={"fields": {"server": self.server, "reason": detail}})
        return AuthRequired(self.server, 401, detail=detail, needs_login=True)

    def _needs_login(self) -> AuthRequired:
        return AuthRequired(
            self.server,
            401,
            detail=f"it needs consent first: run `mcp-supervisor auth login {self.server}`",
            needs_login=True,
        )
