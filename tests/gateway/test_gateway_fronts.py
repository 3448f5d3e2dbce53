"""The HTTP and stdio fronts give identical answers: one test body, run against
``/mcp`` of the real admin server and against the real ``mcp-supervisor stdio``
command, both from the same config file, both over raw JSON-RPC, each answer compared whole
with the one expected (list, a call, an unknown tool, an ``isError`` outcome, a call a
trust rule denies); and on both, one 4 MiB message gets an error of its own while the
session lives on (supergateway#190)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.settings.loader import load_config
from tests.gateway.test_stdio_front import CLI, MINI, Front
from tests.support.admin import ALICE, admin_running
from tests.support.gateway_http import McpHttp, request

MAX_MESSAGE = 4 * 1024 * 1024  # the default gateway.max_message_bytes
Ask = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""One JSON-RPC request to a front → its response; an oversized one: the error."""


def write_config(tmp_path: Path) -> Path:
    mini = {"command": sys.executable, "args": [MINI], "trusted": True}
    config = {
        "servers": {"mini": mini},
        "tool_search": {"enabled": False},
        "trust": {"rules": [{"permission": "mcp:mini:echo", "pattern": "/etc/*", "action": "deny"}]},
        "admin": {"tokens": {ALICE: "alice"}},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


@asynccontextmanager
async def http_front(tmp_path: Path, config: Path) -> AsyncIterator[Ask]:
    async with admin_running(load_config(config), tmp_path / "state") as api:
        session = McpHttp(api.http(ALICE))
        await session.open()

        async def ask(message: dict[str, Any]) -> dict[str, Any]:
            reply = await session.post(message, accept="application/json")
            answer: dict[str, Any] = reply.json()
            return answer

        yield ask


@asynccontextmanager
async def stdio_front(tmp_path: Path, config: Path) -> AsyncIterator[Ask]:
    command = [str(CLI), "stdio", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    process = await trio.lowlevel.open_process(command, stdin=-1, stdout=-1, stderr=-1)
    front = Front(process)
    try:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw"}}
        await front.send(request(0, "initialize", init))
        assert "result" in await front.receive()
        await front.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        async def ask(message: dict[str, Any]) -> dict[str, Any]:
            await front.send(message)
            return await front.receive()

        yield ask
        assert process.stdin is not None
        await process.stdin.aclose()
        assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


FRONTS = {"http": http_front, "stdio": stdio_front}


@pytest.mark.parametrize("front", list(FRONTS))
async def test_both_fronts_answer_alike_and_a_4_mib_message_leaves_the_session_open(
    tmp_path: Path, front: str
) -> None:
    with trio.fail_after(30):
        async with FRONTS[front](tmp_path, write_config(tmp_path)) as ask:
            listed = await ask(request(1, "tools/list"))
            assert listed["id"] == 1 and set(listed["result"]) == {"tools"}
            tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
            assert {"mini_add", "mini_fail", "mini_sleep"} <= set(tools)
            assert tools["mini_echo"]["inputSchema"] == {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            }

            called = await ask(request(2, "tools/call", {"name": "mini_add", "arguments": {"a": 2, "b": 3}}))
            assert called == {
                "jsonrpc": "2.0",
                "id": 2,
                "result": {"content": [{"type": "text", "text": "5"}], "isError": False},
            }

            unknown = await ask(request(3, "tools/call", {"name": "mini_nope", "arguments": {}}))
            assert unknown == {
                "jsonrpc": "2.0",
                "id": 3,
                "error": {"code": -32602, "message": "unknown tool mini_nope"},
            }

            failed = await ask(request(4, "tools/call", {"name": "mini_fail", "arguments": {}}))
            assert failed == {
                "jsonrpc": "2.0",
                "id": 4,
                "result": {"content": [{"type": "text", "text": "this tool always fails"}], "isError": True},
            }

            denied = await ask(
                request(5, "tools/call", {"name": "mini_echo", "arguments": {"text": "/etc/x"}})
            )
            why = (
                "call to mini_echo denied: trust rule [0] permission='mcp:mini:echo' pattern='/etc/*' "
                "matched 'mcp:mini:echo' (argument text): deny"
            )
            assert denied == {
                "jsonrpc": "2.0",
                "id": 5,
                "result": {
                    "content": [{"type": "text", "text": why}],
                    "isError": True,
                    "_meta": {"mcp-supervisor/error": {"code": "denied"}},
                },
            }

            huge = request(6, "tools/call", {"name": "mini_echo", "arguments": {"text": "x" * MAX_MESSAGE}})
            refused = await ask(
                huge
            )  # its id: stdio reads it from the line's head; HTTP (413) does not read on
            assert refused["id"] in (6, None) and refused["error"]["code"] == -32600
            assert "max_message_bytes" in refused["error"]["message"]

            after = await ask(
                request(7, "tools/call", {"name": "mini_echo", "arguments": {"text": "still open"}})
            )
            assert after == {
                "jsonrpc": "2.0",
                "id": 7,
                "result": {"content": [{"type": "text", "text": "still open"}], "isError": False},
            }
