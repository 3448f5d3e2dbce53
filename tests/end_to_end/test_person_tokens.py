"""Each person's own OAuth client state on one server (``StoreVault.for_person``, one
``OAuthProvider`` per person) against the loopback authorization server, which learns
who signed in and records whose token each MCP request carried: each person's requests
carry their own token, proven at the server; with rotating refresh tokens one person's
refresh never invalidates another's; two concurrent renewals of one person's expired
token make one refresh request; each person's record is sealed in a row of their own."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlencode

import httpx2
import trio

from actors.auth.provider import OAuthProvider, OAuthSettings
from supervisor.store import Store
from supervisor.store.sealing import Sealer
from supervisor.store.vault import StoreVault
from tests.end_to_end.test_oauth_client import auth_server
from tests.support.paths import SERVERS

sys.path.insert(0, str(SERVERS))
from oauth_server import OAuthServer

NAME = "docs"
KEY = bytes(range(32))
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip


class Browser:
    """A person's browser at a login page that consents at once: it follows the
    authorization URL as ``person`` (the test server reads ``user``) and returns where
    the authorization server sends it back."""

    redirect_uri = "http://127.0.0.1:1/callback"

    def __init__(self, person: str) -> None:
        self.person = person

    async def authorize(self, server: str, url: str) -> str:
        async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as http:
            answer = await http.get(f"{url}&{urlencode({'user': self.person})}")
        assert answer.status_code == 302, answer.text
        return answer.headers["location"]


class Clock:
    """The providers' wall clock, moved by the test (the tokens' expiry is absolute)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def people(
    tmp_path: Path, server: OAuthServer, clock: Clock
) -> AsyncIterator[dict[str, OAuthProvider]]:
    """alice's and bob's providers of one server, on their own vaults of one sealed store."""
    with Store.open(tmp_path / "supervisor.db") as store:
        store.seal_with(Sealer((KEY,)))
        shared = StoreVault(store)
        yield {
            person: OAuthProvider(
                NAME, server.mcp_url, OAuthSettings(), shared.for_person(person), Browser(person), clock=clock
            )
            for person in ("alice", "bob")
        }


async def mcp_request(server: OAuthServer, provider: OAuthProvider) -> int:
    """One MCP request with the provider's token; its HTTP status."""
    headers = {
        "accept": "application/json, text/event-stream",
        "authorization": provider.authorization() or "",
    }
    async with httpx2.AsyncClient(timeout=10) as http:
        return (await http.post(server.mcp_url, json=INITIALIZE, headers=headers)).status_code


async def test_each_persons_requests_carry_their_own_token_and_records_are_theirs(tmp_path: Path) -> None:
    clock = Clock()
    async with auth_server() as server, people(tmp_path, server, clock) as providers:
        for provider in providers.values():
            await provider.login(None)  # each in their own browser
        assert [q.get("user") for q in server.authorize_requests] == ["alice", "bob"]
        assert providers["alice"].authorization() != providers["bob"].authorization()
        for person in ("bob", "alice", "bob"):
            assert await mcp_request(server, providers[person]) == 200
        assert server.mcp_users == ["bob", "alice", "bob"]
        # A new run's providers load each person's own record: no new sign-in.
        async with people(tmp_path, server, clock) as again:
            for provider in again.values():
                await provider.prepare()
            assert await mcp_request(server, again["alice"]) == 200
            assert await mcp_request(server, again["bob"]) == 200
        assert server.mcp_users[-2:] == ["alice", "bob"] and len(server.authorize_requests) == 2
    with sqlite3.connect(tmp_path / "supervisor.db") as connection:
        rows = connection.execute("SELECT person, record FROM oauth ORDER BY person").fetchall()
    assert [person for person, _ in rows] == ["alice", "bob"]
    data = b"".join(p.read_bytes() for p in tmp_path.glob("supervisor.db*"))  # noqa: ASYNC240
    assert all(record.startswith("sealed:v1:") for _, record in rows)
    for provider in providers.values():
        token = (provider.authorization() or "").split(" ", 1)[1]
        assert token.encode() not in data


async def test_one_persons_refresh_never_invalidates_anothers_and_concurrent_ones_make_one(
    tmp_path: Path,
) -> None:
    clock = Clock()
    async with auth_server(rotate_refresh=True) as server, people(tmp_path, server, clock) as providers:
        for provider in providers.values():
            await provider.login(None)
        clock.now += 7200  # both access tokens expired (issued for an hour)
        alice, bob = providers["alice"], providers["bob"]
        assert alice.expired() and bob.expired()
        async with trio.open_nursery() as nursery:  # alice's two calls at once: one refresh
            nursery.start_soon(alice.renew)
            nursery.start_soon(alice.renew)
        refreshes = [r for r in server.token_requests if r.get("grant_type") == "refresh_token"]
        assert len(refreshes) == 1 and server.refreshes == ["alice"]
        await bob.renew()  # alice's rotation left bob's refresh token good
        assert server.refreshes == ["alice", "bob"]
        assert not alice.expired() and not bob.expired()
        assert await mcp_request(server, alice) == 200 and await mcp_request(server, bob) == 200
        assert server.mcp_users == ["alice", "bob"]
