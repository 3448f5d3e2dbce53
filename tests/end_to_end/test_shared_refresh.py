"""Remote servers' OAuth records shared by processes on one store, refreshed under a
lease (``supervisor/store/oauth_rows.py``, ``StoreVault.renewing``): three supervisors
on one PostgreSQL racing to refresh an expired token with rotating refresh tokens make
one refresh request and all call with its token, as do three processes after a 401; a
lease left behind by a holder that died (a real process, SIGKILLed holding it) is taken
over once it expires; per-person records lease per person; no token in a
log line."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.auth.authorizers import FollowRedirectAuthorizer
from actors.auth.provider import OAuthProvider, OAuthSettings
from supervisor.service import Supervisor
from supervisor.settings.model import Config, SecretsAtRest, StoreSettings
from supervisor.store import Store
from supervisor.store.sealing import Sealer
from supervisor.store.vault import StoreVault
from tests.end_to_end.test_oauth_client import NAME, auth_server, config, echo, grants, settled
from tests.end_to_end.test_person_tokens import Browser, Clock, mcp_request
from tests.support.paths import SERVERS

sys.path.insert(0, str(SERVERS))
from oauth_server import OAuthServer

KEY = bytes(range(32))


def shared_config(server: OAuthServer, url: str) -> Config:
    """The server on the PostgreSQL store, sealed with one key all replicas share."""
    return attrs.evolve(
        config(server.mcp_url), store=StoreSettings(url=url), secrets_at_rest=SecretsAtRest((KEY,))
    )


def opener(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Store]:
    """Opens one more connection to the test's store: one "process" each."""
    if backend == "sqlite":
        return lambda: Store.open(tmp_path / "supervisor.db")
    from supervisor.store.postgres import open_postgres

    url: str = request.getfixturevalue("postgres_url")
    return lambda: open_postgres(url)


def expire(store: Store, url: str, person: str = "") -> str:
    """Make the stored access token expired long ago; returns its refresh token."""
    record = store.oauth_record(NAME, url, person=person)
    assert record is not None
    record["tokens"]["expires_at"] = 1.0
    store.save_oauth(NAME, url, record, 2.0, person=person)
    return str(record["tokens"]["refresh_token"])


async def test_three_supervisors_on_one_postgresql_race_one_refresh(
    tmp_path: Path, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    from supervisor.store.postgres import open_postgres

    async with auth_server(rotate_refresh=True, token_delay_s=0.3) as server:
        cfg = shared_config(server, postgres_url)
        async with Supervisor.open(
            cfg, state_dir=tmp_path / "a", authorizer=FollowRedirectAuthorizer()
        ) as one:
            assert (await settled(one)).available
        with open_postgres(postgres_url) as store:
            store.seal_with(Sealer((KEY,)))
            old_refresh = expire(store, server.mcp_url)
        before = len(server.mcp_statuses)
        results: dict[str, Any] = {}

        async def replica(name: str, all_up: trio.Event, up: list[str]) -> None:
            async with Supervisor.open(cfg, state_dir=tmp_path / name) as supervisor:
                assert (await settled(supervisor)).available
                up.append(name)
                if len(up) == 3:
                    all_up.set()
                await all_up.wait()  # all three up at once: none answered from another's start
                results[name] = await echo(supervisor, name)

        all_up, up = trio.Event(), []
        async with trio.open_nursery() as nursery:
            for name in ("b", "c", "d"):
                nursery.start_soon(replica, name, all_up, up)
        refreshes = [r for r in server.token_requests if r.get("grant_type") == "refresh_token"]
        assert len(refreshes) == 1 and refreshes[0]["refresh_token"] == old_refresh
        assert grants(server) == ["authorization_code", "refresh_token"]
        assert all(result.ok for result in results.values()) and len(results) == 3
        assert 401 not in server.mcp_statuses[before:]  # none sent the expired token, nor a rotated-out one
        with open_postgres(postgres_url) as store:
            store.seal_with(Sealer((KEY,)))
            record = store.oauth_record(NAME, server.mcp_url)
            assert store._read("SELECT * FROM oauth_leases") == []  # released
    assert record is not None and record["tokens"]["refresh_token"] != old_refresh
    secrets = {old_refresh, record["tokens"]["refresh_token"], record["tokens"]["access_token"]}
    secrets |= {r.get("access_token", "") for r in server.token_requests} - {""}
    text = "\n".join(f"{r.getMessage()} {getattr(r, 'fields', '')}" for r in caplog.records)
    assert all(secret not in text for secret in secrets)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_lease_left_behind_is_taken_over_once_it_expires_and_leases_are_per_person(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """alice's lease is held by a process that died mid-refresh: bob's refresh goes at
    once, alice's waits for the lease to run out, then one refresh of hers is made."""
    caplog.set_level(logging.INFO)
    clock, reopen = Clock(), opener(backend, request, tmp_path)
    async with auth_server(rotate_refresh=True) as server:
        with reopen() as store:
            store.seal_with(Sealer((KEY,)))
            vault = StoreVault(store)
            providers = {
                person: OAuthProvider(
                    NAME,
                    server.mcp_url,
                    OAuthSettings(),
                    vault.for_person(person),
                    Browser(person),
                    clock=clock,
                )
                for person in ("alice", "bob")
            }
            for provider in providers.values():
                await provider.login(None)
            clock.now += 7200  # both access tokens expired
            with reopen() as dead:  # another process took alice's lease, then was killed
                assert dead.take_oauth_lease(NAME, server.mcp_url, "dead:1:x", 0.5, person="alice") == (
                    True,
                    None,
                )
            alice, bob = providers["alice"], providers["bob"]
            started = trio.current_time()
            await bob.renew()
            assert trio.current_time() - started < 0.4  # bob's lease is his own
            assert server.refreshes == ["bob"]
            await alice.renew()
            assert trio.current_time() - started >= 0.4  # waited for the dead holder's lease
            assert server.refreshes == ["bob", "alice"]
            assert not alice.expired() and await mcp_request(server, alice) == 200
            assert await mcp_request(server, bob) == 200
    (line,) = [r for r in caplog.records if "lease taken over" in r.getMessage()]
    assert line.fields == {"server": NAME, "person": "alice", "from": "dead:1:x"}  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_three_providers_on_their_own_connections_refresh_once_after_a_401(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The 401 path: three processes whose token the server revoked each get a 401; one
    refreshes, the other two take its token from the store and retry with it."""
    reopen = opener(backend, request, tmp_path)
    async with auth_server(rotate_refresh=True, token_delay_s=0.2) as server:
        stores = [reopen() for _ in range(3)]
        try:
            for store in stores:
                store.seal_with(Sealer((KEY,)))
            providers = [
                OAuthProvider(NAME, server.mcp_url, OAuthSettings(), StoreVault(store), Browser(""))
                for store in stores
            ]
            await providers[0].login(None)
            for provider in providers[1:]:
                await provider.prepare()
            used = providers[0].authorization()
            assert {p.authorization() for p in providers} == {used}
            server.revoke_all()
            async with trio.open_nursery() as nursery:
                for provider in providers:
                    nursery.start_soon(provider.unauthorized, used, None)
            assert server.refreshes == [""]  # one refresh (of the test server's user "")
            (fresh,) = {p.authorization() for p in providers}
            assert fresh != used
            assert all([await mcp_request(server, p) == 200 for p in providers])
        finally:
            for store in stores:
                store.close()


HOLD_AND_HANG = """
import sys, trio
from supervisor.store.postgres import open_postgres
from supervisor.store.vault import StoreVault

async def main() -> None:
    async with StoreVault(open_postgres(sys.argv[1])).renewing("docs", sys.argv[2], lease_s=0.5):
        print("held", flush=True)
        await trio.sleep_forever()  # killed here, mid-renewal

trio.run(main)
"""


async def test_a_process_killed_holding_the_lease_is_taken_over_after_expiry(
    tmp_path: Path, postgres_url: str
) -> None:
    from supervisor.store.postgres import open_postgres

    clock = Clock()
    async with auth_server(rotate_refresh=True) as server:
        with open_postgres(postgres_url) as store:
            store.seal_with(Sealer((KEY,)))
            provider = OAuthProvider(
                NAME, server.mcp_url, OAuthSettings(), StoreVault(store), Browser(""), clock=clock
            )
            await provider.login(None)
            clock.now += 7200
            process = await trio.lowlevel.open_process(
                [sys.executable, "-c", HOLD_AND_HANG, postgres_url, server.mcp_url],
                stdout=subprocess.PIPE,
                cwd=Path(__file__).parents[2],
            )
            try:
                assert process.stdout is not None
                with trio.fail_after(20):
                    assert await process.stdout.receive_some(4) == b"held"
            finally:
                process.kill()  # SIGKILL: no release
                await process.wait()
            started = trio.current_time()
            with trio.fail_after(5):
                await provider.renew()
            assert trio.current_time() - started > 0.2  # it waited for the dead holder's lease
            assert server.refreshes == [""] and await mcp_request(server, provider) == 200
