"""A gateway client has no turns of its own: each listing begins one. A client that
listed while a server was down must not meet that listing's "unavailable in this turn"
once the server is back (pydantic-ai lists before every model step; found by its test).
And a search that activates tools tells a stdio client before it answers, so a client
reading the one pipe in order sees the new list first."""

from __future__ import annotations

import json
import os
import signal
from functools import partial
from pathlib import Path

import attrs
import trio
import trio.testing

from actors.connection.states import State
from supervisor.gateway.stdio_front import lines, serve_stdio
from supervisor.settings.model import ToolSearchSettings
from tests.support.admin import admin_running, config_of, mini_spec, until
from tests.support.gateway_http import McpHttp, initialize
from tests.support.gateway_http import request as rpc


async def test_a_call_after_the_reconnect_works_though_the_client_listed_while_down(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini", "--whoami")), tmp_path) as api:
        mcp = McpHttp(api.http())
        await mcp.open()
        with trio.fail_after(30):
            whoami = await mcp.call(1, "tools/call", {"name": "mini_whoami"})
            os.kill(json.loads(whoami["result"]["content"][0]["text"])["pid"], signal.SIGKILL)
            await until(lambda: api.sup.router.cell.current.servers["mini"].state is State.BACKOFF)
            await mcp.call(2, "tools/list")  # a turn begun while mini is down
            await until(lambda: api.sup.router.cell.current.servers["mini"].state is State.STEADY)
            answer = await mcp.call(3, "tools/call", {"name": "mini_echo", "arguments": {"text": "back"}})
    assert answer["result"]["isError"] is False, answer
    assert answer["result"]["content"][0]["text"] == "back"


async def test_a_search_tells_a_stdio_client_of_the_new_list_before_it_answers(tmp_path: Path) -> None:
    config = attrs.evolve(config_of(mini_spec("mini")), tool_search=ToolSearchSettings(enabled=True))
    api_dir = tmp_path / "state"
    async with admin_running(config, api_dir) as api:
        for attempt in range(5):  # the order was a race: once in a few runs, the answer came first
            stdin_send, stdin = trio.testing.memory_stream_pair()
            stdout, stdout_receive = trio.testing.memory_stream_pair()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(partial(serve_stdio, api.sup, stdin, stdout, eof_grace_s=0.3))
                answers = lines(stdout_receive, 1 << 20)
                with trio.fail_after(20):
                    for message in (initialize(0), rpc(1, "tools/list")):
                        await stdin_send.send_all(json.dumps(message).encode() + b"\n")
                        await anext(answers)
                    search = rpc(
                        2, "tools/call", {"name": "tool_search", "arguments": {"query": f"echo {attempt}"}}
                    )
                    await stdin_send.send_all(json.dumps(search).encode() + b"\n")
                    first = json.loads(await anext(answers))  # type: ignore[arg-type]
                    second = json.loads(await anext(answers))  # type: ignore[arg-type]
                assert first.get("method") == "notifications/tools/list_changed", (attempt, first, second)
                assert second.get("id") == 2 and second["result"]["isError"] is False
                await stdin_send.aclose()
