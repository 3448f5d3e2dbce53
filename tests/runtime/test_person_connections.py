"""Each person's own upstream credentials (``supervisor/runtime/person_connections.py``,
``sign_ins.py``): two people of one tenant call the same ``per_user`` remote server (the
loopback OAuth test server, a real HTTP transport): each call carries that person's
token, proven at the server; the second person's first call is ``needs_auth`` with their
own authorization URL while the first person's calls go on; their browser finishes it
and their next call carries their token. People's connections end after the idle time.
Refreshes are per person: one's rotating refresh leaves the other's good, and two calls
of one person that meet a refused token make one refresh request (counted at the server)."""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import attrs
import httpx2
import pytest
import trio
import trio.testing

from actors.router.catalog import Catalog
from actors.spec import Credentials, Start
from supervisor.runtime.person_connections import person_owner
from supervisor.service import Supervisor
from supervisor.settings.model import Config, GatewaySettings
from tests.end_to_end import test_oauth_client as oauth_client
from tests.end_to_end.test_oauth_client import auth_server
from tests.support.paths import SERVERS

sys.path.insert(0, str(SERVERS))
from oauth_server import OAuthServer

NAME = "gh"
ECHO = f"{NAME}_echo"


def config(url: str, **gateway: Any) -> Config:
    """The OAuth tests' config, its server ``per_user`` (and lazy: started by a turn)."""
    shared = oauth_client.config(url)
    spec = attrs.evolve(shared.servers[0], name=NAME, start=Start.LAZY, credentials=Credentials.PER_USER)
    return attrs.evolve(shared, servers=(spec,), gateway=GatewaySettings(**gateway))


async def browser(sup: Supervisor, url: str, person: str) -> str:
    """``person``'s browser: signs in at the authorization server (the test server reads
    ``user``), then follows its redirect back to the service (here: the pool's
    ``finish``, what ``GET /v1/oauth/callback`` calls). Returns where it was sent."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as http:
        answer = await http.get(f"{url}&{urlencode({'user': person})}")
    assert answer.status_code == 302, answer.text
    location = answer.headers["location"]
    assert location.startswith(sup.people.sign_ins.callback_url() + "?")
    sup.people.sign_ins.finish(urlsplit(location).query)
    return location


async def ready(sup: Supervisor, person: str) -> None:
    """Until ``person``'s own connection to the server serves."""
    owner = person_owner(person)

    def serving(c: Catalog) -> bool:
        view = c.overlays.get(owner, {}).get(NAME)
        return view is not None and view.available

    with trio.fail_after(10):
        await sup.router.cell.wait_until(serving)


@asynccontextmanager
async def supervising(tmp_path: Path, **gateway: Any) -> AsyncIterator[tuple[OAuthServer, Supervisor]]:
    async with (
        auth_server(rotate_refresh=True) as server,
        Supervisor.open(config(server.mcp_url, **gateway), state_dir=tmp_path) as sup,
    ):
        yield server, sup


async def test_two_people_each_call_with_their_own_token_and_only_the_second_is_asked(
    tmp_path: Path,
) -> None:
    async with supervising(tmp_path) as (server, sup):
        shared = sup.servers()[NAME]
        assert shared.entries == () and sup.people.people(NAME) == {}  # nobody connected yet
        async with sup.session(tenant="acme", person="alice") as alice:
            with trio.fail_after(5):  # her sign-in waits for her browser, not the turn
                await alice.begin_turn()
            signing = sup.people.sign_ins.pending(NAME, "alice")
            assert signing is not None
            await browser(sup, signing.url, "alice")
            await ready(sup, "alice")
            assert (await (await alice.begin_turn()).call(ECHO, {"text": "a1"})).ok
            assert server.mcp_users[-1] == "alice"
            assert sup.servers()[NAME].entries  # her listing is the server's: others see the tools

            async with sup.session(tenant="acme", person="bob") as bob:
                with trio.fail_after(5):
                    bobs_turn = await bob.begin_turn()
                assert ECHO in [tool.id for tool in bobs_turn.tools]  # alice's listing, till his own
                asked = await bobs_turn.call(ECHO, {"text": "b1"})
                assert not asked.ok and asked.error is not None and asked.error.code == "needs_auth"
                assert "bob has not signed in" in asked.error.message
                url = asked.error.authorization_url
                assert url is not None and "state=" in url
                assert asked.as_dict()["error"]["authorization_url"] == url
                assert sup.people.sign_ins.pending(NAME, "alice") is None  # bob's alone
                assert sup.people.people(NAME) == {"needs_auth": 1, "steady": 1}
                users = len(server.mcp_users)
                assert (await (await alice.begin_turn()).call(ECHO, {"text": "a2"})).ok  # nobody waits
                assert server.mcp_users[users:] == ["alice"]

                await browser(sup, url, "bob")
                await ready(sup, "bob")
                assert (await (await bob.begin_turn()).call(ECHO, {"text": "b2"})).ok
                assert server.mcp_users[-1] == "bob"
                assert sup.people.people(NAME) == {"steady": 2}
                assert [q.get("user") for q in server.authorize_requests] == ["alice", "bob"]
    with sqlite3.connect(tmp_path / "supervisor.db") as connection:
        rows = connection.execute("SELECT person, record FROM oauth ORDER BY person").fetchall()
    assert [person for person, _ in rows] == ["alice", "bob"]  # each person's own row, none shared
    assert all(record.startswith("sealed:v1:") for _, record in rows)


async def test_a_used_or_unknown_callback_state_is_refused(tmp_path: Path) -> None:
    from supervisor.runtime.sign_ins import SignInRefused

    async with supervising(tmp_path) as (_server, sup), sup.session(tenant="acme", person="alice") as alice:
        await alice.begin_turn()
        signing = sup.people.sign_ins.pending(NAME, "alice")
        assert signing is not None
        location = await browser(sup, signing.url, "alice")
        with pytest.raises(SignInRefused, match="unknown, used already or expired"):
            sup.people.sign_ins.finish(urlsplit(location).query)  # one-time
        with pytest.raises(SignInRefused):
            sup.people.sign_ins.finish("code=x&state=forged")


async def test_a_persons_connections_end_after_the_idle_time_with_no_session_open(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    alices = person_owner("alice")

    async def after(seconds: float) -> bool:
        """Jump the clock; whether alice's connections are still there once what it woke
        settled (the store's worker threads included: a few real milliseconds)."""
        mock_clock.jump(seconds)
        for _ in range(5):
            await trio.testing.wait_all_tasks_blocked()
            await trio.to_thread.run_sync(time.sleep, 0.01)
        return alices in sup.router.cell.current.overlays

    async with supervising(tmp_path, session_idle_s=60.0) as (_server, sup):
        async with sup.session(tenant="acme", person="alice") as alice:
            await alice.begin_turn()  # starts her connection (its sign-in waits for her)
            assert await after(120)  # an open session keeps it, however long
        assert await after(30)
        async with sup.session(tenant="acme", person="alice"):  # back in time: kept
            pass
        assert await after(59)
        assert not await after(2)  # 60 s with no session of hers: ended, overlay gone
        assert sup.people.people(NAME) == {}
        async with sup.session(tenant="acme", person="alice") as alice:
            await alice.begin_turn()  # a new session starts a new one
            assert alices in sup.router.cell.current.overlays


async def test_refreshes_are_per_person_and_one_persons_concurrent_calls_make_one(tmp_path: Path) -> None:
    async with (
        supervising(tmp_path) as (server, sup),
        sup.session(tenant="acme", person="alice") as alice,
        sup.session(tenant="acme", person="bob") as bob,
    ):
        sessions = {"alice": alice, "bob": bob}
        for person, session in sessions.items():
            await session.begin_turn()
            signing = sup.people.sign_ins.pending(NAME, person)
            assert signing is not None
            await browser(sup, signing.url, person)
            await ready(sup, person)
        turns = {person: await session.begin_turn() for person, session in sessions.items()}
        server.revoke_all()  # every access token refused from now: each person's is renewed
        answers: list[bool] = []

        async def call(person: str) -> None:
            answers.append((await turns[person].call(ECHO, {"text": person})).ok)

        async with trio.open_nursery() as nursery:  # alice twice at once, bob once
            for person in ("alice", "alice", "bob"):
                nursery.start_soon(call, person)
        assert answers == [True, True, True]
        refreshes = [r for r in server.token_requests if r.get("grant_type") == "refresh_token"]
        assert sorted(server.refreshes) == ["alice", "bob"] and len(refreshes) == 2  # rotating: both good
        assert sorted(server.mcp_users[-3:]) == ["alice", "alice", "bob"]
