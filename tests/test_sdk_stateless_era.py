"""Our client against the official SDK 2.3's Streamable HTTP server in its stateless
2026-07-28 era (served in-process by Hypercorn on Trio), with every JSON-RPC message
the server received recorded by tests/servers/method_log.py: a call goes through with
no ``initialize`` and no session on the wire."""

from __future__ import annotations

from pathlib import Path

import trio

from supervisor import Supervisor
from supervisor.settings.model import Config
from tests.servers.method_log import MethodLog
from tests.test_http_transport_peers import START_S, hypercorn_app, remote, sdk_server


async def test_a_call_reaches_the_sdk_server_with_no_initialize_on_the_wire(tmp_path: Path) -> None:
    logged = MethodLog(sdk_server().streamable_http_app())
    async with hypercorn_app(logged) as base:
        spec = remote("sdk", f"{base}/mcp", transport="streamable-http")
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            with trio.fail_after(START_S):
                turn = await s.begin_turn()
                added = await turn.call("sdk_add", {"a": 2, "b": 40})
            assert added.ok and added.text == "42", added
            assert sup.servers()["sdk"].protocol_version == "2026-07-28"
    assert logged.methods[0] == "server/discover"
    assert "tools/list" in logged.methods and "tools/call" in logged.methods
    assert "initialize" not in logged.methods
    assert "notifications/initialized" not in logged.methods
    assert {seen.session for seen in logged.seen} == {None}  # no protocol session either
    requests = [seen for seen in logged.seen if seen.method is not None]
    assert {seen.version for seen in requests} == {"2026-07-28"}
