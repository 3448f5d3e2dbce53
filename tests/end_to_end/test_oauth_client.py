"""OAuth for remote servers, end to end: the real Supervisor, the real HTTP transport and
the OAuth provider against our loopback authorization server (tests/servers/oauth_server.py).

Covered: discovery → registration → PKCE authorization → token; tokens stored (0600) and
used on the next start; an expired stored token refreshed *before* the first request; a
401 mid-session refreshed once and the call retried; a second 401 ends the calls
``auth_failed`` and parks the server in ``needs_auth`` (no retry loop) until a restart
after login; client credentials; scope step-up on 403; a tampered ``state`` and a
foreign resource refused; no token in any log line.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actors.auth.authorizers import Authorizer, FollowRedirectAuthorizer
from actors.connection.messages import Control
from actors.connection.states import State
from actors.router.catalog import Catalog, ServerView
from actors.spec import ServerSpec, Start
from supervisor.runtime.logs import NOISY_LOGGERS
from supervisor.runtime.state_dir import open_store
from supervisor.service import Supervisor
from supervisor.settings.model import Config, ToolSearchSettings
from supervisor.store import Store
from tests.support.paths import SERVERS

sys.path.insert(0, str(SERVERS))
from http_fault_server import FaultOptions
from oauth_server import OAuthOptions, OAuthServer, serve_oauth_server

NAME = "docs"
ECHO = f"{NAME}_echo"


def config(url: str, **oauth: str) -> Config:
    spec = ServerSpec(
        name=NAME,
        type="remote",
        url=url,
        transport="streamable-http",
        trusted=True,
        start=Start.EAGER,
        init_timeout_s=10.0,
        call_timeout_s=10.0,
        reconnect_schedule_s=(0.2, 0.5),
        shutdown_grace_s=0.5,
        ping_timeout_s=2.0,
        oauth=oauth,
    )
    return Config(servers=(spec,), tool_search=ToolSearchSettings(enabled=False))


@asynccontextmanager
async def auth_server(**options: Any) -> AsyncIterator[OAuthServer]:
    async with trio.open_nursery() as nursery:
        server: OAuthServer = await nursery.start(serve_oauth_server, OAuthOptions(**options))
        yield server
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def supervising(
    server: OAuthServer, state_dir: Path, authorizer: Authorizer | None = None, **oauth: str
) -> AsyncIterator[Supervisor]:
    async with Supervisor.open(
        config(server.mcp_url, **oauth), state_dir=state_dir, authorizer=authorizer
    ) as supervisor:
        yield supervisor


async def settled(supervisor: Supervisor, done: Callable[[ServerView], bool] | None = None) -> ServerView:
    """Wait (bounded) until the server is serving, or failed, or ``done`` holds."""

    def ready(c: Catalog) -> bool:
        view = c.servers[NAME]
        if done is not None:
            return done(view)
        return view.available or view.last_error is not None

    with trio.fail_after(10):
        await supervisor.router.cell.wait_until(ready)
    return supervisor.router.cell.current.servers[NAME]


async def echo(supervisor: Supervisor, text: str = "hi") -> Any:
    async with supervisor.session() as session:
        turn = await session.begin_turn()
        return await turn.call(ECHO, {"text": text})


def stored_record(state_dir: Path, url: str) -> dict[str, Any] | None:
    with open_store(state_dir, Config()) as store:  # with the key the service sealed it with
        return store.oauth_record(NAME, url)


def grants(server: OAuthServer) -> list[str]:
    return [r.get("grant_type", "?") for r in server.token_requests]


async def test_the_whole_flow_then_the_stored_token_on_the_next_start(tmp_path: Path) -> None:
    async with auth_server() as server:
        async with supervising(server, tmp_path, FollowRedirectAuthorizer()) as supervisor:
            view = await settled(supervisor)
            assert view.available, view.last_error
            result = await echo(supervisor)
            assert result.ok and "hi" in result.text
        # discovery found the path-aware metadata, registered, authorized with PKCE S256
        assert server.metadata_requests[:2] == [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-authorization-server",
        ]
        assert len(server.registrations) == 1
        (request,) = server.authorize_requests
        assert request["code_challenge_method"] == "S256" and request["code_challenge"]
        assert request["resource"] == server.mcp_url
        assert request["scope"] == "mcp:read mcp:write"  # everything the resource supports
        assert grants(server) == ["authorization_code"]
        assert server.token_requests[0]["code_verifier"]

        record = stored_record(tmp_path, server.mcp_url)
        assert record is not None and record["tokens"]["access_token"] in server.valid_access_tokens()
        assert record["tokens"]["expires_at"] > 0
        mode = stat.S_IMODE(os.stat(tmp_path / "supervisor.db").st_mode)
        assert mode == 0o600

        # a second start uses the stored token: no registration, no consent, no token request
        async with supervising(server, tmp_path) as supervisor:
            assert (await settled(supervisor)).available
            assert (await echo(supervisor)).ok
        assert len(server.registrations) == 1 and len(server.authorize_requests) == 1
        assert grants(server) == ["authorization_code"]


async def test_an_expired_stored_token_is_refreshed_before_the_first_request(tmp_path: Path) -> None:
    async with auth_server() as server:
        async with supervising(server, tmp_path, FollowRedirectAuthorizer()) as supervisor:
            assert (await settled(supervisor)).available
        record = stored_record(tmp_path, server.mcp_url)
        assert record is not None
        old_refresh = record["tokens"]["refresh_token"]
        record["tokens"]["expires_at"] = 1.0  # expired long ago, while we were not running
        with Store.open(tmp_path / "supervisor.db") as store:
            store.save_oauth(NAME, server.mcp_url, record, 2.0)
        statuses_before = len(server.mcp_statuses)

        async with supervising(server, tmp_path) as supervisor:
            assert (await settled(supervisor)).available
            assert (await echo(supervisor)).ok
        assert grants(server) == ["authorization_code", "refresh_token"]
        assert server.token_requests[1]["refresh_token"] == old_refresh
        assert 401 not in server.mcp_statuses[statuses_before:]  # no dead token sent first
        rotated = stored_record(tmp_path, server.mcp_url)
        assert rotated is not None and rotated["tokens"]["refresh_token"] != old_refresh


async def test_a_401_mid_session_refreshes_once_and_the_call_goes_through(tmp_path: Path) -> None:
    async with auth_server(valid_requests=4) as server:
        async with supervising(server, tmp_path, FollowRedirectAuthorizer()) as supervisor:
            assert (await settled(supervisor)).available
            for n in range(4):
                result = await echo(supervisor, f"call {n}")
                assert result.ok, result.error
            view = supervisor.router.cell.current.servers[NAME]
            assert view.state is State.STEADY and view.reconnects == 0
        assert "refresh_token" in grants(server)
        assert len(server.authorize_requests) == 1  # refreshed, not re-authorized
        assert 401 in server.mcp_statuses


async def test_a_second_401_fails_the_call_and_parks_the_server_in_needs_auth(
    tmp_path: Path, thread_safe_clock: trio.testing.MockClock
) -> None:
    async with (
        auth_server() as server,
        supervising(server, tmp_path, FollowRedirectAuthorizer()) as supervisor,
    ):
        assert (await settled(supervisor)).available
        server.options.reject_all = True
        result = await echo(supervisor)
        assert not result.ok
        assert (result.error.code, result.error.message) == ("auth_failed", "authentication failed")
        view = await settled(supervisor, lambda v: v.condition == "needs_auth")
        assert view.state is State.BACKOFF and view.next_retry_at is None
        assert view.last_error is not None and "authentication failed" in view.last_error
        await trio.sleep(0.2)  # the attempt's other requests end with it
        requests = len(server.token_requests) + len(server.authorize_requests)
        assert grants(server) == ["authorization_code", "refresh_token"]  # refreshed once
        await trio.sleep(600)  # (virtual time) far past the whole schedule: nothing retried
        assert len(server.token_requests) + len(server.authorize_requests) == requests
        again = await echo(supervisor)
        assert not again.ok and again.error.code == "unavailable"  # down when the turn began
        assert again.error.message.startswith(f"mcp server {NAME} is unavailable in this turn (backoff ")

        # consent again (what `auth login` does), then an operator restart: serving
        server.options.reject_all = False
        await supervisor.command(NAME, Control.RESTART)
        assert (await settled(supervisor, lambda v: v.available)).condition is None
        assert (await echo(supervisor)).ok


async def test_without_an_authorizer_the_server_waits_for_auth_login(tmp_path: Path) -> None:
    async with auth_server() as server:
        async with supervising(server, tmp_path) as supervisor:
            view = await settled(supervisor, lambda v: v.condition == "needs_auth")
            assert view.next_retry_at is None
            assert f"run `mcp-supervisor auth login {NAME}`" in (view.last_error or "")
        assert server.authorize_requests == [] and server.token_requests == []


async def test_client_credentials_with_a_preregistered_client(tmp_path: Path) -> None:
    secret = "cc-secret-planted-1234"
    async with auth_server(dcr=False, preregistered={"svc": secret}) as server:
        async with supervising(
            server, tmp_path, flow="client_credentials", client_id="svc", client_secret=secret
        ) as supervisor:
            assert (await settled(supervisor)).available
            assert (await echo(supervisor)).ok
        assert grants(server) == ["client_credentials"]
        assert server.token_requests[0]["authorization"].startswith("Basic ")
        assert "client_secret" not in server.token_requests[0]
        assert server.authorize_requests == [] and server.registrations == []


async def test_insufficient_scope_steps_up_and_retries(tmp_path: Path) -> None:
    options = {"scopes_supported": None, "challenge_scope": "mcp:read", "insufficient_scope_for": "echo"}
    async with auth_server(**options) as server:
        async with supervising(server, tmp_path, FollowRedirectAuthorizer()) as supervisor:
            assert (await settled(supervisor)).available
            result = await echo(supervisor)
            assert result.ok, result.error
        scopes = [r["scope"] for r in server.authorize_requests]
        assert scopes == ["mcp:read", "mcp:read mcp:write"]


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"tamper_state": True}, "the state did not match"),
        ({"prm_resource": "http://127.0.0.1:9/elsewhere"}, "no token is sent to it"),
    ],
)
async def test_refusals_name_the_reason_and_send_no_token(
    tmp_path: Path, options: dict[str, Any], reason: str
) -> None:
    async with auth_server(**options) as server:
        async with supervising(server, tmp_path, FollowRedirectAuthorizer()) as supervisor:
            view = await settled(supervisor, lambda v: v.condition == "needs_auth")
            assert reason in (view.last_error or "")
        assert server.token_requests == []


async def test_no_token_or_secret_reaches_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in NOISY_LOGGERS:  # as `serve` configures them (raw headers at DEBUG)
        caplog.set_level(logging.WARNING, logger=name)
    async with auth_server(valid_requests=2, dcr_auth_method="client_secret_post") as server:
        async with supervising(server, tmp_path, FollowRedirectAuthorizer()) as supervisor:
            assert (await settled(supervisor)).available
            for _ in range(3):
                assert (await echo(supervisor)).ok
        record = stored_record(tmp_path, server.mcp_url)
    assert record is not None
    secrets = {record["client"]["client_secret"], record["tokens"]["refresh_token"]}
    secrets |= {r.get("code", "") for r in server.token_requests} - {""}
    secrets |= {r.get("access_token", "") for r in server.token_requests} - {""}
    secrets |= set(server.valid_access_tokens())
    text = "\n".join(f"{r.getMessage()} {getattr(r, 'fields', '')}" for r in caplog.records)
    assert "refresh_token" in grants(server)
    for secret in secrets:
        assert secret and secret not in text


async def test_no_token_reaches_the_admin_api_its_events_or_an_error(tmp_path: Path) -> None:
    from tests.support.admin import admin_running

    async with auth_server(valid_requests=3, dcr_auth_method="client_secret_basic") as server:
        async with supervising(server, tmp_path, FollowRedirectAuthorizer()) as supervisor:
            assert (await settled(supervisor)).available  # consent once; tokens stored
        seen: list[bytes] = []
        async with admin_running(config(server.mcp_url), tmp_path) as api:
            http = api.http()
            with trio.fail_after(20):
                async with http.stream("GET", "/v1/events") as events:
                    sid = await http.session()
                    tid = (await http.turn(sid))["turn_id"]
                    for n in range(4):  # the token runs out after 3 requests: refreshed
                        reply = await http.call(sid, tid, ECHO, {"text": f"n{n}"})
                        assert reply.json()["ok"], reply
                        seen.append(reply.raw)
                    server.options.reject_all = True
                    failed = await http.call(sid, tid, ECHO, {"text": "x"})
                    error = failed.json()["error"]
                    assert error == {"code": "auth_failed", "message": "authentication failed"}
                    await events.until(lambda e: e.data.get("condition") == "needs_auth")
                    seen += [failed.raw, events.raw]
                    for path in ("/v1/servers", f"/v1/servers/{NAME}", "/v1/tools", "/metrics"):
                        seen.append((await http.request("GET", path)).raw)
        detail = seen[-3].decode()  # GET /v1/servers/docs
        assert '"condition":"needs_auth"' in detail.replace(" ", "") and "authentication failed" in detail
    assert "refresh_token" in grants(server), server.token_requests
    record = stored_record(tmp_path, server.mcp_url)
    assert record is not None
    secrets = {record["client"]["client_secret"], record["tokens"]["access_token"]}
    secrets |= {r[key] for r in server.token_requests for key in ("code", "refresh_token") if key in r}
    secrets |= set(server.valid_access_tokens())
    everything = b"\n".join(seen).decode()
    for secret in secrets:
        assert secret and secret not in everything


@pytest.mark.parametrize("transport", ["auto", "sse"])
async def test_a_legacy_sse_server_behind_oauth(tmp_path: Path, transport: str) -> None:
    async with auth_server(mcp=FaultOptions(legacy=True)) as server:
        spec = attrs.evolve(config(server.mcp_url).servers[0], transport=transport)
        cfg = Config(servers=(spec,), tool_search=ToolSearchSettings(enabled=False))
        async with Supervisor.open(cfg, state_dir=tmp_path, authorizer=FollowRedirectAuthorizer()) as sup:
            view = await settled(sup)
            assert view.available, view.last_error
            result = await echo(sup)
            assert result.ok, result.error
        assert grants(server) == ["authorization_code"]
        assert 401 not in server.mcp_statuses[server.mcp_statuses.index(200) :]  # the token went along


async def test_a_token_expiring_mid_session_is_refreshed_before_it_is_sent(tmp_path: Path) -> None:
    async with auth_server(access_ttl_s=1) as server:
        async with supervising(server, tmp_path, FollowRedirectAuthorizer()) as supervisor:
            assert (await settled(supervisor)).available
            assert (await echo(supervisor)).ok
            served = len(server.mcp_statuses)
            await trio.sleep(0.8)  # inside the last quarter of its 1 s life
            assert (await echo(supervisor)).ok
        assert grants(server)[:2] == ["authorization_code", "refresh_token"]
        assert 401 not in server.mcp_statuses[served:]  # renewed first, not refused first
