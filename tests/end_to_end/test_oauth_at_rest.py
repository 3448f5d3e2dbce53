"""Tokens at rest after a real OAuth flow (the test authorization server, a real
supervisor): ``supervisor.db`` read directly holds no token, refresh token, client
secret or DPoP private key in clear; a rotation with ``mcp-supervisor secrets rotate``
(a real process) and a lost key behave as docs/identity.md says."""

from __future__ import annotations

import base64
import json
import logging
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.auth.authorizers import Authorizer, FollowRedirectAuthorizer
from supervisor.runtime.state_dir import open_store
from supervisor.service import Supervisor
from supervisor.settings.model import Config, SecretsAtRest
from supervisor.store.sealing import PREFIX, key_id
from supervisor.store.vault import StoreVault
from tests.actors.auth.test_oauth_dpop import DPoPServers, provider
from tests.end_to_end.test_oauth_client import NAME, auth_server, config, echo, settled, stored_record
from tests.support.paths import REPO

ROTATE = "mcp-supervisor secrets rotate --config mcp.json --state-dir state"
"""As docs/identity.md shows it, run as written."""


def keyed(url: str, *keys: bytes) -> Config:
    return attrs.evolve(
        config(url, dcr_auth_method="client_secret_post"), secrets_at_rest=SecretsAtRest(keys)
    )


def raw(state: Path) -> tuple[bytes, list[str]]:
    """The database's bytes (with its WAL, if any) and its oauth rows, read without us."""
    data = b"".join(p.read_bytes() for p in state.glob("supervisor.db*"))
    with sqlite3.connect(state / "supervisor.db") as connection:
        rows = [record for (record,) in connection.execute("SELECT record FROM oauth")]
    return data, rows


def secrets_of(record: dict[str, Any]) -> list[str]:
    found = [record["tokens"]["access_token"], record["tokens"]["refresh_token"]]
    found += [record["client"]["client_secret"]]
    if record.get("dpop_key"):
        found.append(record["dpop_key"]["d"])
    return found


async def signed_in(url: str, state: Path, cfg: Config, authorizer: Authorizer | None) -> None:
    async with Supervisor.open(cfg, state_dir=state, authorizer=authorizer) as supervisor:
        assert (await settled(supervisor)).available
        assert (await echo(supervisor)).ok


async def test_no_token_refresh_token_client_secret_or_dpop_key_is_in_the_file(tmp_path: Path) -> None:
    async with auth_server(dcr_auth_method="client_secret_post") as server:
        await signed_in(server.mcp_url, tmp_path, config(server.mcp_url), FollowRedirectAuthorizer())
        record = stored_record(tmp_path, server.mcp_url)
    assert record is not None
    # A DPoP key too: a client of a DPoP server (scripted) keeps its records in the same store.
    with open_store(tmp_path, Config()) as store:
        oauth = provider(DPoPServers(), StoreVault(store))  # type: ignore[arg-type]
        await oauth.unauthorized(None, 'DPoP resource_metadata="https://mcp.example/x"')
        dpop = store.oauth_record("docs", "https://mcp.example/mcp")
    assert dpop is not None and dpop["dpop_key"]["d"]
    planted = [*secrets_of(record), dpop["dpop_key"]["d"], dpop["client"]["client_secret"]]
    planted.append(dpop["tokens"]["access_token"])
    data, rows = raw(tmp_path)
    assert len(rows) == 2 and all(row.startswith(PREFIX) for row in rows)
    for secret in planted:
        assert secret and secret.encode() not in data
        assert not any(secret in row for row in rows)
    key = (tmp_path / "secrets.key").read_text().strip()
    assert oct((tmp_path / "secrets.key").stat().st_mode & 0o777) == "0o600"
    assert key.encode() not in data


async def test_a_rotation_with_the_command_then_the_old_key_dropped(tmp_path: Path) -> None:
    old, new = os.urandom(32), os.urandom(32)
    state = tmp_path / "state"
    async with auth_server(dcr_auth_method="client_secret_post") as server:
        await signed_in(server.mcp_url, state, keyed(server.mcp_url, old), FollowRedirectAuthorizer())
        # new key first, old second: the record sealed with the old one still opens (no authorizer)
        await signed_in(server.mcp_url, state, keyed(server.mcp_url, new, old), None)
        assert raw(state)[1][0].startswith(f"{PREFIX}{key_id(old)}:")

        (tmp_path / "new.key").write_text(base64.b64encode(new).decode() + "\n")
        (tmp_path / "old.key").write_text(base64.b64encode(old).decode() + "\n")
        doc = {"secrets_at_rest": {"keys": ["${file:new.key}", "${file:old.key}"]}}
        (tmp_path / "mcp.json").write_text(json.dumps(doc))
        assert ROTATE in (REPO / "docs" / "identity.md").read_text()
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the venv's mcp-supervisor
        with trio.fail_after(60):
            done = await trio.run_process(
                ROTATE, shell=True, cwd=tmp_path, env={**os.environ, "PATH": path},
                capture_stdout=True, capture_stderr=True, check=False,
            )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode().startswith("secrets rotate: 1 OAuth record(s) sealed with the first key")
        assert raw(state)[1][0].startswith(f"{PREFIX}{key_id(new)}:")

        await signed_in(server.mcp_url, state, keyed(server.mcp_url, new), None)  # old key gone
        assert len(server.authorize_requests) == 1  # one sign-in all along


async def test_a_lost_key_drops_the_record_with_one_line_and_the_server_needs_login(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lost, other = os.urandom(32), os.urandom(32)
    async with auth_server(dcr_auth_method="client_secret_post") as server:
        await signed_in(server.mcp_url, tmp_path, keyed(server.mcp_url, lost), FollowRedirectAuthorizer())
        record = stored_record_with(tmp_path, server.mcp_url, lost)
        caplog.set_level(logging.WARNING, logger="supervisor.store.secrets")
        async with Supervisor.open(keyed(server.mcp_url, other), state_dir=tmp_path) as supervisor:
            view = await settled(supervisor, lambda v: v.condition == "needs_auth")
            assert f"run `mcp-supervisor auth login {NAME}`" in (view.last_error or "")
            async with supervisor.session() as session:  # the service runs
                assert (await session.begin_turn()).epoch is not None
        assert raw(tmp_path)[1] == []
    (line,) = [r for r in caplog.records if r.name == "supervisor.store.secrets"]
    assert "oauth record dropped" in line.getMessage() and getattr(line, "fields", {})["server"] == NAME
    shown = line.getMessage() + str(getattr(line, "fields", {}))
    assert not any(secret in shown for secret in secrets_of(record))


def stored_record_with(state: Path, url: str, key: bytes) -> dict[str, Any]:
    with open_store(state, Config(secrets_at_rest=SecretsAtRest((key,)))) as store:
        record = store.oauth_record(NAME, url)
    assert record is not None
    return record
