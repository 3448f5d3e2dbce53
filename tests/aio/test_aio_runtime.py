"""``supervisor.aio`` while it runs: servers added, commanded, asked for their status,
removed, a config reloaded; and a remote server's OAuth consent asked of an asyncio
authorizer (our loopback authorization server, tests/servers/oauth_server.py, in a Trio
run of its own thread: the test's thread has the guest run)."""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from actors.connection.messages import Control
from actors.connection.states import State
from actors.spec import Start
from supervisor.aio import Supervisor
from supervisor.settings.model import Config
from tests.end_to_end.test_oauth_client import ECHO, NAME, config, stored_record
from tests.support.aio_host import host, mini, servers_until, state_of
from tests.support.paths import SERVERS

sys.path.insert(0, str(SERVERS))
from oauth_server import OAuthOptions, OAuthServer, serve_oauth_server


def test_servers_added_commanded_removed_and_a_reload_from_asyncio(tmp_path: Path) -> None:
    first = mini("a", start=Start.EAGER)
    config_ = Config(servers=(first,))

    async def main() -> None:
        async with Supervisor.open(config_, state_dir=tmp_path) as sup:
            assert list(sup.servers()) == ["a"]
            await sup.add_server(mini("b", "--stderr-lines", "2", start=Start.EAGER))
            before = await state_of(sup, "b", State.STEADY)
            status = await sup.connection_status("b")
            assert status is not None and status.stderr_tail[-1] == "stderr line 1"
            assert status.in_flight == 0
            await sup.command("b", Control.RESTART)
            await servers_until(sup, lambda s: s["b"].state is State.STEADY and s["b"].since > before.since)
            await sup.remove_server("b")
            assert "b" not in sup.servers()
            with pytest.raises(KeyError, match="no server named 'nobody'; known: a"):
                await sup.connection_status("nobody")  # as the Trio API raises it
            plan = await sup.reload(Config(servers=(first, mini("c"))))
            assert [spec.name for spec in plan.start] == ["c"] and sup.config.servers[1].name == "c"
            assert list(sup.servers()) == ["a", "c"]

    host(main)


@contextmanager
def oauth_server_thread(**options: Any) -> Iterator[OAuthServer]:
    """Our authorization server (and the MCP server it protects) in a thread's Trio run."""
    handed: queue.Queue[tuple[OAuthServer, trio.lowlevel.TrioToken, trio.CancelScope]] = queue.Queue()

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(serve_oauth_server, OAuthOptions(**options))
            handed.put((server, trio.lowlevel.current_trio_token(), nursery.cancel_scope))

    thread = threading.Thread(target=trio.run, args=(serve,), daemon=True)
    thread.start()
    server, token, scope = handed.get(timeout=10)
    try:
        yield server
    finally:
        token.run_sync_soon(scope.cancel)
        thread.join(10)


class FollowRedirect:
    """An asyncio authorizer: consent without a person, by httpx2 on asyncio (so sniffio
    must see asyncio in the host's task, not Trio)."""

    redirect_uri = "http://127.0.0.1:1/callback"

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def authorize(self, server: str, url: str) -> str:
        self.asked.append((server, url))
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            response = await http.get(url)
        assert response.status_code == 302, response.text
        return response.headers["location"]


def test_a_remote_servers_oauth_consent_is_asked_of_an_asyncio_authorizer(tmp_path: Path) -> None:
    authorizer = FollowRedirect()
    with oauth_server_thread() as server:

        async def main() -> None:
            opened = Supervisor.open(config(server.mcp_url), state_dir=tmp_path, authorizer=authorizer)
            async with opened as sup:
                view = (await servers_until(sup, lambda s: s[NAME].available or s[NAME].last_error))[NAME]
                assert view.available, view.last_error
                async with sup.session() as session:
                    echoed = await (await session.begin_turn()).call(ECHO, {"text": "hi"})
                    assert echoed.ok and "hi" in echoed.text, echoed

        host(main)
        assert [(who, url.split("?")[0]) for who, url in authorizer.asked] == [
            (NAME, f"{server.issuer}/authorize")
        ]
        assert server.authorize_requests and server.authorize_requests[0]["code_challenge_method"] == "S256"
    record = stored_record(tmp_path, server.mcp_url)
    assert record is not None and record["tokens"]["access_token"]
