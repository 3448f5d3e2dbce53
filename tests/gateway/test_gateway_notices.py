"""What a gateway client hears besides answers (``supervisor/gateway/notices.py``):
list_changed only to the client whose view changed, once per change, activation
notices, the servers' log messages by level and owner; and tools a trust rule denies
outright are not listed."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actors.connection.server_log import ServerLogged, admits, log_server_message
from actors.protocol.notifications import LogMessage
from actors.redaction import Redactor
from actors.spec import Scope
from supervisor import Supervisor
from supervisor.gateway.notices import run_notices
from supervisor.gateway.peer import GatewayPeer
from supervisor.sessions.session import Session
from supervisor.settings.model import Config, ToolSearchSettings, TrustRule, TrustSettings
from tests.gateway.test_gateway_core import Recorder as KeptMessages
from tests.service.test_embedding import config_of, mini_spec

LIST_CHANGED = "notifications/tools/list_changed"


@pytest.fixture
def python() -> str:
    return sys.executable


class Recorder(KeptMessages):
    """An outlet that keeps what it is sent, and can wait for it."""

    def __init__(self) -> None:
        super().__init__()
        self._news = trio.Event()

    async def send(self, message: Mapping[str, Any]) -> None:
        await super().send(message)
        self._news.set()
        self._news = trio.Event()

    async def wait_for(self, methods: list[str]) -> None:
        """Until the methods sent are ``methods`` (well before 5 s)."""
        with trio.fail_after(5):
            while self.methods() != methods:
                await self._news.wait()

    def methods(self) -> list[str]:
        return [m["method"] for m in self.sent]


@attrs.define
class Client:
    peer: GatewayPeer
    heard: Recorder
    ids: int = 0

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self.ids += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        if params is not None:
            message["params"] = dict(params)
        answer = await self.peer.receive(message, Recorder())
        assert answer is not None and "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result


@asynccontextmanager
async def client(sup: Supervisor, session: Session) -> AsyncIterator[Client]:
    peer = GatewayPeer(session, lambda key: sup.requests.cancel(key, session.tenant))
    heard = Recorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_notices, peer, heard, sup.router.cell)
        c = Client(peer, heard)
        await c.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
        yield c
        nursery.cancel_scope.cancel()


async def settle(sup: Supervisor) -> None:
    """Let every watcher see the newest catalog (the servers' I/O counts as blocked)."""
    await trio.testing.wait_all_tasks_blocked(0.05)


async def test_a_view_change_reaches_only_its_client_once_and_a_relist_stays_quiet(
    tmp_path: Path, python: str
) -> None:
    config = config_of(mini_spec("mini", python=python, scope=Scope.SESSION))
    async with (
        Supervisor.open(config, state_dir=tmp_path) as sup,
        sup.session() as session_a,
        sup.session() as session_b,
        client(sup, session_a) as a,
        client(sup, session_b) as b,
    ):
        for c in (a, b):
            names = [tool["name"] for tool in (await c.request("tools/list"))["tools"]]
            assert "mini_echo" in names and "mini_extra" not in names
        await a.request("tools/call", {"name": "mini_add_tool", "arguments": {"name": "extra"}})
        await a.heard.wait_for([LIST_CHANGED])
        await settle(sup)
        assert a.heard.methods() == [LIST_CHANGED]  # once, however many epochs followed
        assert b.heard.methods() == []  # its private server did not change

        names = [tool["name"] for tool in (await a.request("tools/list"))["tools"]]
        assert "mini_extra" in names
        # Another change that is not A's: B hears it, A's relisted view is the same.
        await b.request("tools/call", {"name": "mini_add_tool", "arguments": {"name": "other"}})
        await b.heard.wait_for([LIST_CHANGED])
        await settle(sup)
        assert a.heard.methods() == [LIST_CHANGED]
        assert b.heard.methods() == [LIST_CHANGED]


async def test_a_client_that_never_listed_hears_no_list_changed(tmp_path: Path, python: str) -> None:
    config = config_of(mini_spec("mini", python=python))
    async with (
        Supervisor.open(config, state_dir=tmp_path) as sup,
        sup.session() as session,
        client(sup, session) as quiet,
        client(sup, session) as lister,
    ):
        await lister.request("tools/list")
        await lister.request("tools/call", {"name": "mini_add_tool", "arguments": {"name": "x"}})
        await lister.heard.wait_for([LIST_CHANGED])
        await settle(sup)
        assert quiet.heard.methods() == []


async def test_an_activation_tells_the_searching_client(tmp_path: Path, python: str) -> None:
    config = attrs.evolve(
        config_of(mini_spec("mini", python=python)), tool_search=ToolSearchSettings(enabled=True)
    )
    async with (
        Supervisor.open(config, state_dir=tmp_path) as sup,
        sup.session() as session,
        client(sup, session) as c,
    ):
        listed = [tool["name"] for tool in (await c.request("tools/list"))["tools"]]
        assert listed == ["tool_search"]
        found = await c.request("tools/call", {"name": "tool_search", "arguments": {"query": "echo"}})
        assert found["isError"] is False
        await c.heard.wait_for([LIST_CHANGED])
        listed = [tool["name"] for tool in (await c.request("tools/list"))["tools"]]
        assert "mini_echo" in listed
        # The same search again activates nothing new: nothing more is sent.
        await c.request("tools/call", {"name": "tool_search", "arguments": {"query": "echo"}})
        await settle(sup)
        assert c.heard.methods() == [LIST_CHANGED]


async def test_a_tool_denied_outright_is_not_listed(tmp_path: Path, python: str) -> None:
    rules = (
        TrustRule("mcp:mini:fail", "*", "deny"),
        TrustRule("mcp:mini:echo", "/tmp/*", "deny"),  # some calls only: still listed
        TrustRule("mcp:mini:add", "*", "deny"),
        TrustRule("mcp:mini:add", "*", "allow"),  # a later allow wins
    )
    config = Config(servers=(mini_spec("mini", python=python),), trust=TrustSettings(rules=rules))
    async with (
        Supervisor.open(config, state_dir=tmp_path) as sup,
        sup.session() as session,
        client(sup, session) as c,
    ):
        names = [tool["name"] for tool in (await c.request("tools/list"))["tools"]]
        assert "mini_fail" not in names
        assert "mini_echo" in names and "mini_add" in names


async def test_server_logs_reach_clients_by_level_and_owner(tmp_path: Path, python: str) -> None:
    config = config_of(mini_spec("mini", python=python))
    async with (
        Supervisor.open(config, state_dir=tmp_path) as sup,
        sup.session() as session,
        client(sup, session) as c,
    ):
        c.peer.core.capabilities = lambda: {"tools": {}, "logging": {}}  # type: ignore[method-assign]
        await c.request("logging/setLevel", {"level": "error"})
        logs = session.server_logs
        logs.publish(ServerLogged("mini", "info", "too quiet"))
        logs.publish(ServerLogged("mini", "error", "private of another", owner="someone-else"))
        logs.publish(ServerLogged("mini", "critical", "mine", owner=session.id))
        logs.publish(ServerLogged("mini", "error", "shared"))
        await settle(sup)
        assert [m["params"] for m in c.heard.sent] == [
            {"level": "critical", "logger": "mini", "data": "mine"},
            {"level": "error", "logger": "mini", "data": "shared"},
        ]


def test_a_log_sink_gets_each_message_redacted_with_a_known_level() -> None:
    got: list[ServerLogged] = []
    redactor = Redactor(("hunter2-secret-value",))
    log_server_message("db", LogMessage("alert", "pg", {"pw": "hunter2-secret-value"}), redactor, got.append)
    log_server_message("db", LogMessage("LOUD", None, "x"), redactor, got.append)
    first, second = got
    assert (first.server, first.level, first.logger) == ("db", "alert", "pg")
    assert "hunter2" not in first.data
    assert second.level == "warning"
    assert admits("warning", "error") and not admits("error", "warning")
