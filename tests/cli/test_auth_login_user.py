"""``mcp-supervisor auth login SERVER --user PERSON`` for a ``per_user`` server: offline
on the state directory it stores that person's own tokens (their row alone), which
their connection then uses; with a running service and an operator token it restarts
that person's connection only, which leaves their pending sign-in. ``--user`` is needed
for a ``per_user`` server and refused for a shared one."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import httpx2
import pytest
import trio

from supervisor.cli.auth_login import LoginError, login
from supervisor.runtime.state_dir import open_store
from supervisor.service import Supervisor
from supervisor.settings.loader import load_config
from supervisor.settings.model import AdminSettings, Config, TokenGrant
from supervisor.web.roles import Role
from tests.cli.test_auth_login import read_until, start_login
from tests.end_to_end.test_oauth_client import auth_server
from tests.runtime.test_person_connections import ECHO, NAME, config, ready
from tests.support.admin import admin_running

OPERATOR = "operator-token-0123456789"


def write_config(path: Path, url: str, credentials: str = "per_user") -> Path:
    entry = {
        "type": "remote",
        "url": url,
        "transport": "streamable-http",
        "oauth": {},
        "credentials": credentials,
    }
    path.write_text(json.dumps({"servers": {NAME: entry}}))
    return path


async def browse(url: str, person: str) -> httpx2.Response:
    """``person``'s browser: consents (the test server reads ``user``) and follows the
    redirect to wherever the sign-in waits for it."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as browser:
        return await browser.get(f"{url}&user={person}")


async def test_offline_login_stores_the_persons_own_tokens_which_their_connection_uses(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    async with auth_server() as server:
        path = write_config(tmp_path / "c.json", server.mcp_url)
        process = await start_login(path, state, NAME, "--user", "alice")
        assert process.stdout is not None and process.stderr is not None
        with trio.fail_after(20):
            printed = await read_until(process.stdout, b"Waiting for the redirect")
            url = next(line.strip() for line in printed.decode().splitlines() if "/authorize?" in line)
            page = await browse(url, "alice")
            assert page.status_code == 200 and "You can close this window" in page.text
            rest = b""
            while chunk := await process.stdout.receive_some():
                rest += chunk
            assert await process.wait() == 0
        assert f"Authorized mcp server {NAME}; alice's own tokens are stored" in (printed + rest).decode()
        with open_store(state, Config()) as store:
            assert store.oauth_record(NAME, server.mcp_url) is None  # nobody else's
            mine = store.oauth_record(NAME, server.mcp_url, person="alice")
        assert mine is not None and mine["tokens"]["access_token"] in server.valid_access_tokens()

        opened = Supervisor.open(config(server.mcp_url), state_dir=state)
        async with opened as sup, sup.session(tenant="acme", person="alice") as alice:
            await alice.begin_turn()  # her connection starts on her stored tokens
            await ready(sup, "alice")
            assert sup.people.sign_ins.pending(NAME, "alice") is None
            assert (await (await alice.begin_turn()).call(ECHO, {"text": "hi"})).ok
        assert server.mcp_users[-1] == "alice" and len(server.authorize_requests) == 1


async def test_user_is_needed_for_a_per_user_server_and_refused_for_a_shared_one(tmp_path: Path) -> None:
    async with auth_server() as server:
        per_user = load_config(write_config(tmp_path / "p.json", server.mcp_url))
        shared = load_config(write_config(tmp_path / "s.json", server.mcp_url, "shared"))
        with pytest.raises(LoginError, match="with --user PERSON") as caught:
            await login(per_user, NAME, state_dir=tmp_path / "state")
        assert caught.value.status == 2
        with pytest.raises(LoginError, match="drop --user") as caught:
            await login(shared, NAME, state_dir=tmp_path / "state", user="alice")
        assert caught.value.status == 2
        assert server.token_requests == []


async def test_with_a_running_service_it_restarts_that_persons_connection(tmp_path: Path) -> None:
    async with auth_server() as server:
        admin = AdminSettings(tokens={OPERATOR: TokenGrant("ops", Role.OPERATOR)})
        cfg = attrs.evolve(config(server.mcp_url), admin=admin)
        async with admin_running(cfg, tmp_path) as api, api.sup.session(tenant="acme", person="bob") as bob:
            await bob.begin_turn()
            assert api.sup.people.sign_ins.pending(NAME, "bob") is not None  # his sign-in waits
            shown: list[str] = []
            url_shown = trio.Event()

            def show(text: str) -> None:
                shown.append(text)
                if "/authorize?" in text:
                    url_shown.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    lambda: login(
                        cfg,
                        NAME,
                        state_dir=tmp_path,
                        show=show,
                        admin_url=api.url,
                        admin_token=OPERATOR,
                        user="bob",
                    )
                )
                with trio.fail_after(10):
                    await url_shown.wait()
                url = next(word for word in "\n".join(shown).split() if "/authorize?" in word)
                assert (await browse(url, "bob")).status_code == 200
            assert f"Restarted {NAME} in the supervisor at {api.url}." in shown
            await ready(api.sup, "bob")  # on the tokens the command stored
            assert api.sup.people.sign_ins.pending(NAME, "bob") is None
            assert (await (await bob.begin_turn()).call(ECHO, {"text": "hi"})).ok
            assert server.mcp_users[-1] == "bob"
