"""``mcp-supervisor auth login SERVER`` as a user runs it: a separate process that prints
the authorization URL and waits on a loopback port; the test plays the browser. Then a
supervisor started on the same state directory uses the stored tokens at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
import trio

from actors.spec import ServerSpec, Start
from actors.transports.instances import instances_dir
from supervisor.runtime.state_dir import open_store
from supervisor.service import Supervisor
from supervisor.settings.model import Config, ToolSearchSettings
from tests.support.paths import REPO, SERVERS

sys.path.insert(0, str(SERVERS))
from oauth_server import OAuthOptions, OAuthServer, serve_oauth_server

ROOT = REPO


def write_config(path: Path, url: str, oauth: object = None) -> Path:
    entry: dict[str, object] = {"type": "remote", "url": url, "transport": "streamable-http"}
    if oauth is not None:
        entry["oauth"] = oauth
    path.write_text(json.dumps({"servers": {"docs": entry, "local": {"command": "true"}}}))
    return path


async def start_login(config: Path, state: Path, *extra: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [sys.executable, "-m", "supervisor.cli", "auth", "login", *extra,
         "--config", str(config), "--state-dir", str(state), "--url", "http://127.0.0.1:9"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=dict(os.environ),
    )  # fmt: skip


async def read_until(stream: trio.abc.ReceiveStream, marker: bytes) -> bytes:
    seen = b""
    while marker not in seen:
        chunk = await stream.receive_some()
        assert chunk, f"the command ended before printing {marker!r}: {seen!r}"
        seen += chunk
    return seen


async def test_login_in_a_browser_stores_tokens_that_serve_then_uses(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with trio.open_nursery() as nursery:
        server: OAuthServer = await nursery.start(serve_oauth_server, OAuthOptions())
        config = write_config(tmp_path / "c.json", server.mcp_url, {"scope": "mcp:read"})
        process = await start_login(config, state, "docs")
        assert process.stdout is not None and process.stderr is not None
        with trio.fail_after(20):
            printed = await read_until(process.stdout, b"Waiting for the redirect")
            url = next(line.strip() for line in printed.decode().splitlines() if "/authorize?" in line)
            # the browser: the authorization server consents at once and redirects to
            # the command's loopback listener, which must answer the page
            async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as browser:
                page = await browser.get(url)
            assert page.status_code == 200 and "You can close this window" in page.text
            assert str(page.url).startswith("http://127.0.0.1:") and "/callback?code=" in str(page.url)
            rest = b""
            while chunk := await process.stdout.receive_some():
                rest += chunk
            errors = b""
            while chunk := await process.stderr.receive_some():
                errors += chunk
            assert await process.wait() == 0, errors
        assert not instances_dir(state).exists()  # a client of the state directory, not an instance
        out = (printed + rest).decode()
        assert "Authorized mcp server docs" in out
        assert "No supervisor answers at http://127.0.0.1:9" in out
        assert server.authorize_requests[0]["scope"] == "mcp:read"
        assert server.authorize_requests[0]["redirect_uri"] == server.registrations[0]["redirect_uris"][0]
        with open_store(state, Config()) as store:  # sealed with the state directory's key
            record = store.oauth_record("docs", server.mcp_url)
        assert record is not None and record["tokens"]["access_token"] in server.valid_access_tokens()
        assert record["tokens"]["access_token"] not in out + errors.decode()

        # `serve` (here: the embedding API on the same state directory) is serving at once
        spec = ServerSpec(
            name="docs", type="remote", url=server.mcp_url, transport="streamable-http",
            trusted=True, start=Start.EAGER, oauth={"scope": "mcp:read"}, init_timeout_s=10.0,
        )  # fmt: skip
        cfg = Config(servers=(spec,), tool_search=ToolSearchSettings(enabled=False))
        async with Supervisor.open(cfg, state_dir=state) as supervisor:
            with trio.fail_after(10):
                await supervisor.router.cell.wait_until(lambda c: c.servers["docs"].available)
        assert len(server.authorize_requests) == 1 and len(server.token_requests) == 1
        nursery.cancel_scope.cancel()


async def test_a_forged_callback_is_refused(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        server: OAuthServer = await nursery.start(serve_oauth_server, OAuthOptions(tamper_state=True))
        config = write_config(tmp_path / "c.json", server.mcp_url, {})
        process = await start_login(config, tmp_path / "state", "docs")
        assert process.stdout is not None and process.stderr is not None
        with trio.fail_after(20):
            printed = await read_until(process.stdout, b"Waiting for the redirect")
            url = next(line.strip() for line in printed.decode().splitlines() if "/authorize?" in line)
            async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as browser:
                await browser.get(url)
            errors = b""
            while chunk := await process.stderr.receive_some():
                errors += chunk
            assert await process.wait() == 1
        assert "the state did not match" in errors.decode()
        assert server.token_requests == []
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("server", "oauth", "message"),
    [
        ("nope", {}, "no server 'nope' in"),
        ("local", {}, "mcp server local is not a remote server"),
        ("docs", None, 'mcp server docs has no "oauth" block; add "oauth": {} to it in the config'),
    ],
)
async def test_usage_errors_exit_2(tmp_path: Path, server: str, oauth: object, message: str) -> None:
    config = write_config(tmp_path / "c.json", "http://127.0.0.1:9/mcp", oauth)
    with trio.fail_after(20):
        done = await trio.run_process(
            [sys.executable, "-m", "supervisor.cli", "auth", "login", server, "--config", str(config),
             "--state-dir", str(tmp_path / "state")],
            capture_stdout=True, capture_stderr=True, check=False, cwd=ROOT,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert message in done.stderr.decode()
