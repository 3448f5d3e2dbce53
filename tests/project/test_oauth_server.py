"""Checks of the loopback OAuth test server itself: the whole flow walked by hand with
httpx2 (discovery, registration, PKCE, tokens, refresh), and its faults."""

from __future__ import annotations

import base64
import hashlib
import secrets
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import trio

from tests.support.paths import SERVERS

sys.path.insert(0, str(SERVERS))
from oauth_server import OAuthOptions, OAuthServer, serve_oauth_server

REDIRECT = "http://127.0.0.1:33333/callback"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip


@asynccontextmanager
async def oauth(**options: Any) -> AsyncIterator[tuple[OAuthServer, httpx2.AsyncClient]]:
    async with trio.open_nursery() as nursery:
        server: OAuthServer = await nursery.start(serve_oauth_server, OAuthOptions(**options))
        async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as http:
            yield server, http
        nursery.cancel_scope.cancel()


async def authorize(
    server: OAuthServer, http: httpx2.AsyncClient, client_id: str, scope: str = "mcp:read", state: str = "s1"
) -> tuple[str, str, str]:
    """The code, the state that came back, and the PKCE verifier."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "scope": scope,
              "state": state, "code_challenge": challenge, "code_challenge_method": "S256",
              "resource": server.mcp_url}  # fmt: skip
    answer = await http.get(f"{server.issuer}/authorize", params=params)
    assert answer.status_code == 302, answer.text
    location = answer.headers["location"]
    assert location.startswith(REDIRECT + "?")
    query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    return query["code"], query["state"], verifier


async def exchange(server: OAuthServer, http: httpx2.AsyncClient, client_id: str, code: str, verifier: str,
                   auth: httpx2.BasicAuth | None = None) -> httpx2.Response:  # fmt: skip
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
            "code_verifier": verifier, "resource": server.mcp_url, "client_id": client_id}  # fmt: skip
    if auth is None:
        return await http.post(f"{server.issuer}/token", data=form)
    return await http.post(f"{server.issuer}/token", data=form, auth=auth)


async def initialize(server: OAuthServer, http: httpx2.AsyncClient, token: str) -> httpx2.Response:
    return await http.post(server.mcp_url, json=INITIALIZE, headers={"authorization": f"Bearer {token}"})


async def test_whole_flow_discovery_registration_pkce_and_a_call() -> None:
    async with oauth(as_prefix="/tenant", challenge_scope="mcp:read") as (server, http):
        refused = await http.post(server.mcp_url, json=INITIALIZE)
        assert refused.status_code == 401
        challenge = refused.headers["www-authenticate"]
        prm_url = f"{server.base}/.well-known/oauth-protected-resource/mcp"
        assert challenge == f'Bearer error="invalid_token", resource_metadata="{prm_url}", scope="mcp:read"'
        prm = (await http.get(prm_url)).json()
        assert prm["resource"] == server.mcp_url and prm["authorization_servers"] == [server.issuer]
        assert server.issuer == f"{server.base}/tenant"
        meta = (await http.get(f"{server.base}/.well-known/oauth-authorization-server/tenant")).json()
        assert meta["code_challenge_methods_supported"] == ["S256"]
        assert (await http.get(f"{server.base}/.well-known/openid-configuration")).status_code == 404
        registered = await http.post(meta["registration_endpoint"],
                                     json={"redirect_uris": [REDIRECT], "client_name": "t"})  # fmt: skip
        assert registered.status_code == 201
        client = registered.json()
        assert client["token_endpoint_auth_method"] == "none" and "client_secret" not in client
        code, state, verifier = await authorize(server, http, client["client_id"])
        assert state == "s1"
        tokens = await exchange(server, http, client["client_id"], code, verifier)
        assert tokens.status_code == 200 and tokens.headers["cache-control"] == "no-store"
        body = tokens.json()
        assert body["token_type"] == "Bearer" and body["scope"] == "mcp:read"
        assert body["access_token"].startswith("at-") and body["refresh_token"].startswith("rt-")
        again = await exchange(server, http, client["client_id"], code, verifier)  # codes are single-use
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
        answer = await initialize(server, http, body["access_token"])
        assert answer.status_code == 200
        assert answer.json()["result"]["serverInfo"]["name"] == "http-fault-server"
        assert server.mcp_statuses == [401, 200]
        assert [s.rpc for s in server.mcp.seen] == ["initialize"]
        assert server.metadata_requests == [prm_url.removeprefix(server.base),
                                            "/.well-known/oauth-authorization-server/tenant",
                                            "/.well-known/openid-configuration"]  # fmt: skip
        assert server.authorize_requests[0]["resource"] == server.mcp_url
        assert server.registrations == [{"redirect_uris": [REDIRECT], "client_name": "t"}]


async def test_refresh_rotates_and_basic_auth_is_checked() -> None:
    async with oauth(dcr_auth_method="client_secret_basic") as (server, http):
        client = (await http.post(f"{server.issuer}/register", json={"redirect_uris": [REDIRECT]})).json()
        client_id, secret = client["client_id"], client["client_secret"]
        code, _, verifier = await authorize(server, http, client_id)
        no_auth = await exchange(server, http, client_id, code, verifier)
        assert no_auth.status_code == 401 and no_auth.json()["error"] == "invalid_client"
        code, _, verifier = await authorize(server, http, client_id)
        basic = httpx2.BasicAuth(client_id, secret)
        first = (await exchange(server, http, client_id, code, verifier, auth=basic)).json()
        assert server.token_requests[-1]["authorization"].startswith("Basic ")
        form = {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}
        second = await http.post(f"{server.issuer}/token", data=form, auth=basic)
        assert second.status_code == 200 and second.json()["refresh_token"] != first["refresh_token"]
        stale = await http.post(f"{server.issuer}/token", data=form, auth=basic)
        assert stale.status_code == 400 and stale.json()["error"] == "invalid_grant"
        wrong = await http.post(f"{server.issuer}/token", data=form, auth=httpx2.BasicAuth(client_id, "nope"))
        assert wrong.status_code == 401


async def test_tokens_good_for_n_requests_and_revocation() -> None:
    async with oauth(valid_requests=1, preregistered={"pub": ""}) as (server, http):
        code, _, verifier = await authorize(server, http, "pub")
        tokens = (await exchange(server, http, "pub", code, verifier)).json()
        assert (await initialize(server, http, tokens["access_token"])).status_code == 200
        assert (await initialize(server, http, tokens["access_token"])).status_code == 401
        assert server.valid_access_tokens() == []
        form = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": "pub"}
        fresh = (await http.post(f"{server.issuer}/token", data=form)).json()
        assert server.valid_access_tokens() == [fresh["access_token"]]
        server.revoke_all()
        assert (await initialize(server, http, fresh["access_token"])).status_code == 401
        assert server.mcp_statuses == [200, 401, 401]


async def test_tampered_state_and_a_wrong_verifier() -> None:
    async with oauth(tamper_state=True, preregistered={"pub": ""}) as (server, http):
        code, state, _ = await authorize(server, http, "pub", state="mine")
        assert state != "mine"
        refused = await exchange(server, http, "pub", code, "not-the-verifier")
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
        no_pkce = {"response_type": "code", "client_id": "pub", "redirect_uri": REDIRECT}
        bad = await http.get(f"{server.issuer}/authorize", params=no_pkce)
        assert bad.status_code == 400  # no PKCE challenge


async def test_insufficient_scope_and_client_credentials() -> None:
    async with oauth(insufficient_scope_for="echo", preregistered={"svc": "s3cret"}) as (server, http):
        url = f"{server.issuer}/token"
        form = {"grant_type": "client_credentials", "client_id": "svc", "client_secret": "s3cret"}
        reader = (await http.post(url, data=form | {"scope": "mcp:read"})).json()
        writer = (await http.post(url, data=form | {"scope": "mcp:read mcp:write"})).json()
        assert "refresh_token" not in reader
        session = (await initialize(server, http, reader["access_token"])).headers["mcp-session-id"]
        echo = {"name": "echo", "arguments": {"text": "hi"}}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": echo}
        headers = {"authorization": f"Bearer {reader['access_token']}", "mcp-session-id": session}
        denied = await http.post(server.mcp_url, json=call, headers=headers)
        assert denied.status_code == 403
        assert denied.headers["www-authenticate"].startswith('Bearer error="insufficient_scope", ')
        assert 'scope="mcp:write"' in denied.headers["www-authenticate"]
        headers["authorization"] = f"Bearer {writer['access_token']}"
        answer = await http.post(server.mcp_url, json=call, headers=headers)
        assert answer.status_code == 200 and answer.json()["result"]["content"][0]["text"] == "hi"
        assert server.mcp_statuses == [200, 403, 200]
