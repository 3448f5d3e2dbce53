"""Token exchange (RFC 8693; actors/auth/grants.py) against our loopback authorization
server: a person's own token from the identity provider they signed in to us with is
exchanged for one of the remote server's, so they need no second sign-in; a refused
exchange, or a caller with no such token, falls back to the usual sign-in; an expired
token with no refresh token is exchanged again without anyone."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
import trio

from actors.auth.authorizers import FollowRedirectAuthorizer
from actors.auth.grants import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE
from actors.auth.provider import MemoryVault, OAuthProvider, OAuthSettings
from actors.transport_errors import AuthRequired
from tests.support.paths import SERVERS

sys.path.insert(0, str(SERVERS))
from oauth_server import GRANT_TYPES, OAuthOptions, OAuthServer, serve_oauth_server

IDP_TOKENS = {"idp-token-of-alice": "alice", "idp-token-of-bob": "bob"}


@asynccontextmanager
async def exchanging_server(**options: Any) -> AsyncIterator[OAuthServer]:
    options = {"grant_types": [*GRANT_TYPES, TOKEN_EXCHANGE], "exchange_subject": IDP_TOKENS.get, **options}
    async with trio.open_nursery() as nursery:
        server: OAuthServer = await nursery.start(serve_oauth_server, OAuthOptions(**options))
        yield server
        nursery.cancel_scope.cancel()


def provider(
    server: OAuthServer, subject: Callable[[], str | None], *, browser: bool = False, exchange: bool = True
) -> OAuthProvider:
    settings = OAuthSettings.from_mapping({"token_exchange": exchange} if exchange else {})
    authorizer = FollowRedirectAuthorizer() if browser else None
    return OAuthProvider("docs", server.mcp_url, settings, MemoryVault(), authorizer, subject_token=subject)


async def challenge(server: OAuthServer) -> str | None:
    """The MCP server's 401 challenge to a request without a token."""
    async with httpx2.AsyncClient() as http:
        answer = await http.post(server.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert answer.status_code == 401
    return answer.headers.get("www-authenticate")


def grants(server: OAuthServer) -> list[str]:
    return [form["grant_type"] for form in server.token_requests]


async def test_the_persons_token_is_exchanged_and_no_browser_is_asked() -> None:
    async with exchanging_server() as server:
        oauth = provider(server, lambda: "idp-token-of-alice")  # no authorizer: no browser
        await oauth.unauthorized(None, await challenge(server))
        assert oauth.authorization() is not None
        assert grants(server) == [TOKEN_EXCHANGE] and server.exchanged == ["alice"]
        form = server.token_requests[0]
        assert form["subject_token"] == "idp-token-of-alice"
        assert form["subject_token_type"] == ACCESS_TOKEN_TYPE
        assert form["requested_token_type"] == ACCESS_TOKEN_TYPE
        assert form["resource"] == server.mcp_url  # RFC 8707: for this server only
        assert server.authorize_requests == []


async def test_a_refused_exchange_falls_back_to_the_persons_sign_in(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    async with exchanging_server() as server:
        oauth = provider(server, lambda: "idp-token-of-mallory", browser=True)
        await oauth.unauthorized(None, await challenge(server))
        assert oauth.authorization() is not None
        assert grants(server) == [TOKEN_EXCHANGE, "authorization_code"] and server.exchanged == []
        assert len(server.authorize_requests) == 1
    refused = [r for r in caplog.records if "token exchange refused" in r.getMessage()]
    assert len(refused) == 1
    assert "idp-token-of-mallory" not in caplog.text


@pytest.mark.parametrize(("subject", "exchange"), [(None, True), ("idp-token-of-alice", False)])
async def test_without_a_persons_token_or_with_exchange_off_nothing_is_exchanged(
    subject: str | None, exchange: bool
) -> None:
    async with exchanging_server() as server:
        oauth = provider(server, lambda: subject, browser=True, exchange=exchange)
        await oauth.unauthorized(None, await challenge(server))
        assert grants(server) == ["authorization_code"]
        headless = provider(server, lambda: subject, exchange=exchange)
        with pytest.raises(AuthRequired):  # and without a browser: needs_auth, as before
            await headless.unauthorized(None, await challenge(server))


async def test_an_expired_token_without_a_refresh_token_is_exchanged_again() -> None:
    now = [1000.0]
    async with exchanging_server(issue_refresh=False, access_ttl_s=60) as server:
        oauth = OAuthProvider(
            "docs", server.mcp_url, OAuthSettings.from_mapping({"token_exchange": True}), MemoryVault(),
            subject_token=lambda: "idp-token-of-bob", clock=lambda: now[0],
        )  # fmt: skip
        await oauth.unauthorized(None, await challenge(server))
        first = oauth.authorization()
        now[0] += 3600
        assert oauth.expired()
        await oauth.renew()
        assert oauth.authorization() not in (None, first)
        assert grants(server) == [TOKEN_EXCHANGE, TOKEN_EXCHANGE] and server.exchanged == ["bob", "bob"]
