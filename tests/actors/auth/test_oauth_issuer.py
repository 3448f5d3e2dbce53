"""Whose answers the OAuth client believes: the authorization server's issuer.

The provider against scripted authorization servers on an ``httpx2.MockTransport`` and a
scripted authorizer that answers the authorization request the way the server is told
to: RFC 9207's ``iss`` in the authorization response (checked when advertised or sent,
by simple string comparison), RFC 8414's metadata ``issuer`` (it must be the identifier
the metadata was fetched for), SEP-2352's change of authorization server (the old
server's client and tokens are dropped, registration and the grant run again at the new
one), SEP-2207's ``offline_access`` (asked only where listed), and SEP-837's
``application_type`` at registration. Each mirrors a client scenario of the conformance
suite 0.2.0-alpha.12 (``auth/iss-*``, ``auth/metadata-issuer-mismatch``,
``auth/authorization-server-migration``, ``auth/offline-access-not-supported``).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

import attrs
import httpx2
import pytest

from actors.auth.discovery import (
    DiscoveryError,
    ServerMetadata,
    check_metadata_issuer,
    check_response_issuer,
    same_issuer,
)
from actors.auth.provider import MemoryVault, OAuthProvider, OAuthSettings
from actors.transport_errors import AuthRequired

MCP = "https://mcp.example/mcp"
PRM = "https://mcp.example/.well-known/oauth-protected-resource/mcp"
AS1 = "https://as1.example"
AS2 = "https://as2.example"
LOOPBACK = "http://127.0.0.1:8765/callback"
KEEP = object()  # the authorizer's iss: the issuer itself


@attrs.define
class AuthServer:
    """One scripted authorization server: what it advertises and how it answers."""

    issuer: str
    metadata_issuer: str | None = None  # what its metadata claims (None: ``issuer``)
    advertises_iss: bool | None = True  # authorization_response_iss_parameter_supported
    sends_iss: Any = KEEP  # in the redirect: KEEP, None (omitted) or a string
    scopes_supported: list[str] | None = None
    refresh_tokens: bool = False
    redirect_tail: str = ""  # appended to the redirect's query
    registrations: list[dict[str, Any]] = attrs.Factory(list)
    authorizations: list[dict[str, str]] = attrs.Factory(list)
    tokens: list[dict[str, str]] = attrs.Factory(list)
    issued: int = 0

    def metadata(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "issuer": self.metadata_issuer or self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "registration_endpoint": f"{self.issuer}/register",
            "code_challenge_methods_supported": ["S256"],
        }
        if self.advertises_iss is not None:
            body["authorization_response_iss_parameter_supported"] = self.advertises_iss
        if self.scopes_supported is not None:
            body["scopes_supported"] = self.scopes_supported
        return body

    def answer(self, request: httpx2.Request) -> httpx2.Response | None:
        url = str(request.url)
        if url == f"{self.issuer}/.well-known/oauth-authorization-server":
            return httpx2.Response(200, json=self.metadata())
        if url == f"{self.issuer}/register":
            body = json.loads(request.content)
            self.registrations.append(body)
            return httpx2.Response(201, json={"client_id": f"client-of-{urlsplit(self.issuer).hostname}"})
        if url == f"{self.issuer}/token":
            form = dict(parse_qsl(request.content.decode()))
            self.tokens.append(form)
            self.issued += 1
            host = urlsplit(self.issuer).hostname
            answer: dict[str, Any] = {"access_token": f"{host}-at-{self.issued}", "token_type": "Bearer"}
            answer["expires_in"] = 3600
            if self.refresh_tokens:
                answer["refresh_token"] = f"{host}-rt-{self.issued}"
            return httpx2.Response(200, json=answer)
        return None

    def redirect(self, url: str) -> str:
        """The authorization endpoint's answer: back to the redirect URI with a code."""
        query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
        self.authorizations.append(query)
        back = {"code": "the-code", "state": query["state"]}
        if self.sends_iss is KEEP:
            back["iss"] = self.metadata_issuer or self.issuer
        elif self.sends_iss is not None:
            back["iss"] = self.sends_iss
        return f"{query['redirect_uri']}?{urlencode(back)}{self.redirect_tail}"


class World:
    """The MCP server's protected-resource metadata and the authorization servers."""

    def __init__(self, *servers: AuthServer) -> None:
        self.servers = {s.issuer: s for s in servers}
        self.current = servers[0].issuer  # the one the resource names

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if str(request.url) == PRM:
            return httpx2.Response(200, json={"resource": MCP, "authorization_servers": [self.current]})
        for server in self.servers.values():
            answer = server.answer(request)
            if answer is not None:
                return answer
        return httpx2.Response(404)


class Consent:
    """An authorizer whose user always consents: the server of the URL redirects back."""

    def __init__(self, world: World, redirect_uri: str = LOOPBACK) -> None:
        self.world = world
        self.redirect_uri = redirect_uri

    async def authorize(self, server: str, url: str) -> str:
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
        return self.world.servers[origin].redirect(url)


def provider(world: World, vault: MemoryVault | None = None, **settings: str) -> OAuthProvider:
    return OAuthProvider(
        "docs", MCP, OAuthSettings.from_mapping(settings), vault or MemoryVault(), Consent(world),
        transport=httpx2.MockTransport(world),
    )  # fmt: skip


# --- RFC 9207: the authorization response's iss --------------------------------------


@pytest.mark.parametrize(
    ("advertises", "sends"),
    [(True, KEEP), (None, None), (False, None), (None, KEEP), (False, KEEP)],
    ids=["iss-supported", "iss-not-advertised", "advertised-false", "unadvertised-correct", "false-correct"],
)
async def test_a_matching_or_absent_unadvertised_iss_gets_the_token(
    advertises: bool | None, sends: Any
) -> None:
    server = AuthServer(AS1, advertises_iss=advertises, sends_iss=sends)
    oauth = provider(World(server))
    await oauth.unauthorized(None, None)
    assert oauth.authorization() == "Bearer as1.example-at-1"
    assert [t["grant_type"] for t in server.tokens] == ["authorization_code"]


@pytest.mark.parametrize(
    ("advertises", "sends", "named"),
    [
        (True, None, "has no iss, but the authorization server https://as1.example advertises it"),
        (
            True,
            "https://evil.example.com",
            "from the issuer 'https://evil.example.com', not 'https://as1.example'",
        ),
        (
            None,
            "https://evil.example.com",
            "from the issuer 'https://evil.example.com', not 'https://as1.example'",
        ),
        (True, f"{AS1}/", "from the issuer 'https://as1.example/', not 'https://as1.example'"),
        (None, "", "from the issuer '', not 'https://as1.example'"),
    ],
    ids=["iss-supported-missing", "iss-wrong-issuer", "iss-unexpected", "iss-normalized", "empty"],
)
async def test_a_missing_wrong_or_unexpected_iss_fails_before_the_token_request(
    advertises: bool | None, sends: str | None, named: str
) -> None:
    server = AuthServer(AS1, advertises_iss=advertises, sends_iss=sends)
    vault = MemoryVault()
    oauth = provider(World(server), vault)
    with pytest.raises(AuthRequired) as failed:
        await oauth.unauthorized(None, None)
    assert failed.value.needs_login and named in str(failed.value)
    assert server.authorizations and server.tokens == []  # the code never went anywhere
    assert oauth.authorization() is None
    stored = await vault.load("docs", MCP)
    assert stored is None or stored.get("tokens") is None


def test_response_issuer_rules() -> None:
    check_response_issuer(AS1, True, AS1)
    check_response_issuer(AS1, False, None)
    for advertised, iss in [(True, None), (False, f"{AS1}/"), (False, "HTTPS://AS1.EXAMPLE"), (True, AS2)]:
        with pytest.raises(DiscoveryError):
            check_response_issuer(AS1, advertised, iss)


async def test_two_iss_parameters_are_refused() -> None:
    server = AuthServer(AS1, redirect_tail=f"&iss={AS1}")
    oauth = provider(World(server))
    with pytest.raises(AuthRequired, match="more than one iss"):
        await oauth.unauthorized(None, None)
    assert server.tokens == []


# --- RFC 8414 §3.3: the metadata's issuer --------------------------------------------


async def test_metadata_naming_another_issuer_is_refused_before_its_endpoints_are_used() -> None:
    server = AuthServer(AS1, metadata_issuer="https://attacker.example.com")
    oauth = provider(World(server))
    with pytest.raises(AuthRequired) as failed:
        await oauth.unauthorized(None, None)
    text = str(failed.value)
    assert "names the issuer https://attacker.example.com, not https://as1.example" in text
    assert server.registrations == server.authorizations == server.tokens == []


@pytest.mark.parametrize("claimed", [f"{AS1}/", AS1])
async def test_metadata_issuer_equal_but_for_a_trailing_slash_is_the_same_issuer(claimed: str) -> None:
    server = AuthServer(AS1, metadata_issuer=claimed)
    oauth = provider(World(server))
    await oauth.unauthorized(None, None)
    assert oauth.authorization() == "Bearer as1.example-at-1"


def test_metadata_issuer_rules() -> None:
    where = "https://as.example/.well-known/oauth-authorization-server/t1"
    ok = ServerMetadata(
        issuer="https://as.example/t1/", authorization_endpoint=None, token_endpoint="https://as.example/t"
    )
    check_metadata_issuer(ok, "https://as.example/t1", where)
    for claimed in [
        "",
        "https://as.example",
        "https://as.example/t2",
        "urn:as",
        "https://as.example:8443/t1",
    ]:
        with pytest.raises(DiscoveryError):
            check_metadata_issuer(attrs.evolve(ok, issuer=claimed), "https://as.example/t1", where)
    assert same_issuer("https://a.example", "https://a.example/")
    assert not same_issuer("https://a.example", "https://b.example")
    assert not same_issuer("urn:a", "urn:b")


# --- SEP-2352: the protected resource names another authorization server -------------


async def test_a_new_authorization_server_gets_a_new_registration_and_the_old_tokens_go() -> None:
    old, new = AuthServer(AS1), AuthServer(AS2)
    world = World(old, new)
    vault = MemoryVault()
    oauth = provider(world, vault)
    await oauth.unauthorized(None, None)
    first = oauth.authorization()
    assert first == "Bearer as1.example-at-1" and len(old.registrations) == 1
    world.current = AS2
    await oauth.unauthorized(first, 'Bearer error="invalid_token"')
    assert oauth.authorization() == "Bearer as2.example-at-1"
    assert len(new.registrations) == 1
    assert [a["client_id"] for a in new.authorizations] == ["client-of-as2.example"]
    assert all(t.get("client_id") != "client-of-as1.example" for t in new.tokens)
    stored = await vault.load("docs", MCP)
    assert stored is not None and stored["issuer"] == AS2
    assert stored["client"]["client_id"] == "client-of-as2.example"


async def test_a_refresh_token_of_the_old_server_is_not_used_after_a_move() -> None:
    old, new = AuthServer(AS1, refresh_tokens=True), AuthServer(AS2)
    world = World(old, new)
    oauth = provider(world)
    await oauth.unauthorized(None, None)
    world.current = AS2
    await oauth.unauthorized(oauth.authorization(), None)
    assert [t["grant_type"] for t in old.tokens] == ["authorization_code"]  # no refresh at AS1
    assert oauth.authorization() == "Bearer as2.example-at-1"


async def test_without_a_move_a_401_still_refreshes() -> None:
    server = AuthServer(AS1, refresh_tokens=True)
    oauth = provider(World(server))
    await oauth.unauthorized(None, None)
    await oauth.unauthorized(oauth.authorization(), None)
    assert [t["grant_type"] for t in server.tokens] == ["authorization_code", "refresh_token"]
    assert len(server.registrations) == 1


async def test_a_configured_client_is_kept_across_a_move() -> None:
    old, new = AuthServer(AS1), AuthServer(AS2)
    world = World(old, new)
    oauth = provider(world, client_id="mine")
    await oauth.unauthorized(None, None)
    world.current = AS2
    await oauth.unauthorized(oauth.authorization(), None)
    assert new.registrations == [] and [a["client_id"] for a in new.authorizations] == ["mine"]


# --- SEP-2207: offline_access only where listed; no refresh expected otherwise -------


@pytest.mark.parametrize(
    ("supported", "asked"),
    [(["mcp:basic", "mcp:read"], "mcp:basic"), (["mcp:basic", "offline_access"], "mcp:basic offline_access")],
)
async def test_offline_access_is_asked_for_only_where_listed(supported: list[str], asked: str) -> None:
    server = AuthServer(AS1, scopes_supported=supported)
    oauth = provider(World(server), scope="mcp:basic")
    await oauth.unauthorized(None, None)
    assert server.authorizations[0]["scope"] == asked


async def test_without_a_refresh_token_an_expired_token_is_renewed_by_the_code_flow() -> None:
    """offline_access not offered: no refresh token comes, none is expected; the next 401
    runs the authorization-code flow again instead of failing."""
    server = AuthServer(AS1, scopes_supported=["mcp:basic"])
    oauth = provider(World(server))
    await oauth.unauthorized(None, None)
    first = oauth.authorization()
    await oauth.unauthorized(first, None)
    assert [t["grant_type"] for t in server.tokens] == ["authorization_code", "authorization_code"]
    assert len(server.authorizations) == 2 and oauth.authorization() == "Bearer as1.example-at-2"


# --- SEP-837: application_type at registration ---------------------------------------


@pytest.mark.parametrize(
    ("redirect", "kind"),
    [(LOOPBACK, "native"), ("http://localhost:9/cb", "native"), ("https://app.example/cb", "web")],
)
async def test_registration_names_the_application_type(redirect: str, kind: str) -> None:
    server = AuthServer(AS1)
    world = World(server)
    oauth = OAuthProvider(
        "docs", MCP, OAuthSettings(), MemoryVault(), Consent(world, redirect),
        transport=httpx2.MockTransport(world),
    )  # fmt: skip
    await oauth.unauthorized(None, None)
    assert server.registrations[0]["application_type"] == kind
    assert server.registrations[0]["redirect_uris"] == [redirect]
