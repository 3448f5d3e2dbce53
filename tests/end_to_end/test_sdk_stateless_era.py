"""Our client against the official SDK 2.3's Streamable HTTP server in its stateless
2026-07-28 era (served in-process by Hypercorn on Trio), with every JSON-RPC message
the server received recorded by tests/servers/method_log.py: a call goes through with
no ``initialize`` and no session on the wire."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor import Supervisor
from supervisor.settings.model import Config
from tests.end_to_end.test_http_transport_peers import START_S, hypercorn_app, remote, sdk_server
from tests.servers.method_log import MethodLog

try:  # the SDK's tool signatures are read at runtime, so Context must be a module name
    from mcp.server.mcpserver import Context
except ImportError:  # pragma: no cover - sdk_server() skips the tests then
    Context = None


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


@pytest.mark.parametrize("ended_first", [False, True], ids=["listening", "after-a-graceful-end"])
async def test_a_tool_added_at_runtime_arrives_through_the_listen_stream(
    tmp_path: Path, ended_first: bool
) -> None:
    """The per-request era has no GET stream: ``notifications/tools/list_changed``
    comes on the ``subscriptions/listen`` stream we open after adoption, and the new
    tool reaches the catalog (a new epoch) without any request of ours.
    ``ended_first``: the server ends the first stream gracefully (its result) right
    after acknowledging it; we listen again on the same connection."""
    server = sdk_server()

    def late(text: str) -> str:
        """A tool that exists only after ``grow`` ran."""
        return text[::-1]

    @server.tool()
    async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
        server.add_tool(late)
        await ctx.notify_tools_changed()
        return "grown"

    logged = MethodLog(server.streamable_http_app())
    acks = 0
    listening = trio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = b""
        ended = False

        async def recorded() -> Any:
            nonlocal body
            message = await receive()
            body += message.get("body", b"")
            return message

        async def watched(message: Any) -> None:
            nonlocal acks, ended
            if ended:
                return  # the app writes on into a stream we already ended
            await send(message)
            if b"notifications/subscriptions/acknowledged" in message.get("body", b""):
                acks += 1  # the server subscribed this stream before it acked
                if ended_first and acks == 1:
                    answer = {"jsonrpc": "2.0", "id": json.loads(body)["id"], "result": {}}
                    data = f"event: message\ndata: {json.dumps(answer)}\n\n".encode()
                    await send({"type": "http.response.body", "body": data, "more_body": False})
                    ended = True
                elif acks == 1 + ended_first:
                    listening.set()

        await logged(scope, recorded, watched)

    async with hypercorn_app(app) as base:
        spec = remote("sdk", f"{base}/mcp", transport="streamable-http")
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            with trio.fail_after(START_S):
                turn = await s.begin_turn()
                assert "sdk_late" not in {t.id for t in turn.tools}
                await listening.wait()
            assert (await turn.call("sdk_grow", {})).ok
            with trio.fail_after(2.0):  # no timer relists: only the notification can do this
                catalog = await sup.router.cell.wait_until(lambda c: "sdk_late" in c.tools)
            assert catalog.epoch > turn.epoch
            later = await s.begin_turn()
            reversed_ = await later.call("sdk_late", {"text": "abc"})
            assert reversed_.ok and reversed_.text == "cba", reversed_
    assert "initialize" not in logged.methods
    assert logged.methods.count("server/discover") == 1  # one connection all along
    assert logged.methods.count("subscriptions/listen") == 1 + ended_first
