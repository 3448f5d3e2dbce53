"""The stdlib mini MCP server that other tests and the demo rely on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.protocol.errors import FramingError
from actors.protocol.jsonrpc import parse_message, to_wire
from actors.protocol.messages import Message
from actors.spec import ServerSpec
from actors.transports.stdio import StdioTransport, open_stdio_transport

BOUND_S = 5.0


class Client:
    """Just enough JSON-RPC to poke the server: numbered requests, line-by-line reads."""

    def __init__(self, transport: StdioTransport) -> None:
        self.transport = transport
        self.pending: list[Message] = []
        self.next_id = 1

    async def send(self, message: dict[str, Any]) -> None:
        await self.transport.send([parse_message({"jsonrpc": "2.0", **message})])

    async def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        request_id, self.next_id = self.next_id, self.next_id + 1
        await self.send({"id": request_id, "method": method, "params": params or {}})
        return request_id

    async def read(self) -> dict[str, Any]:
        while not self.pending:
            self.pending = list(await self.transport.receive())
            if not self.pending:
                raise EOFError
        return to_wire(self.pending.pop(0))

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its response (no notifications expected between)."""
        request_id = await self.request(method, params)
        reply = await self.read()
        assert reply["id"] == request_id
        return reply

    async def initialize(self, version: str = "2025-06-18") -> dict[str, Any]:
        reply = await self.call("initialize", {"protocolVersion": version, "capabilities": {}})
        await self.send({"method": "notifications/initialized"})
        return reply


@asynccontextmanager
async def mini(argv: list[str], *flags: str) -> AsyncIterator[Client]:
    spec = ServerSpec(name="mini", command=(*argv, *flags), shutdown_grace_s=0.5)
    with trio.fail_after(BOUND_S):
        async with open_stdio_transport(spec) as transport:
            yield Client(transport)


@pytest.mark.parametrize(
    ("asked", "answered"),
    [("2024-11-05", "2024-11-05"), ("2025-11-25", "2025-11-25"), ("1999-01-01", "2025-11-25")],
)
async def test_initialize_negotiates_the_version(
    mini_server_argv: list[str], asked: str, answered: str
) -> None:
    async with mini(mini_server_argv) as c:
        result = (await c.initialize(asked))["result"]
        assert result["protocolVersion"] == answered
        assert result["capabilities"] == {"tools": {"listChanged": True}}
        assert (await c.call("ping"))["result"] == {}


async def test_tools_list_is_paginated(mini_server_argv: list[str]) -> None:
    async with mini(mini_server_argv, "--page-size", "4", "--tools", "5") as c:
        await c.initialize()
        names: list[str] = []
        pages = 0
        cursor: str | None = None
        while True:
            result = (await c.call("tools/list", {"cursor": cursor} if cursor else {}))["result"]
            pages += 1
            assert len(result["tools"]) <= 4
            names += [tool["name"] for tool in result["tools"]]
            cursor = result.get("nextCursor")
            if cursor is None:
                break
        assert pages == 4  # 9 built-in tools + 5 generated ones
        assert names[:3] == ["echo", "add", "sleep"]
        assert names[-5:] == [f"tool_{i}" for i in range(5)]
        bad = await c.call("tools/list", {"cursor": "not-a-cursor"})
        assert bad["error"]["code"] == -32602


async def test_generated_tools_have_varied_descriptions(mini_server_argv: list[str]) -> None:
    async with mini(mini_server_argv, "--tools", "40") as c:
        await c.initialize()
        tools = (await c.call("tools/list"))["result"]["tools"]
        generated = [t["description"] for t in tools if t["name"].startswith("tool_")]
        assert len(generated) == 40
        assert len(set(generated)) == 40


async def test_add_tool_announces_list_changed(mini_server_argv: list[str]) -> None:
    async with mini(mini_server_argv) as c:
        await c.initialize()
        request_id = await c.request("tools/call", {"name": "add_tool", "arguments": {"name": "fresh"}})
        assert await c.read() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        reply = await c.read()
        assert reply["id"] == request_id
        assert reply["result"]["content"][0]["text"] == "added fresh"
        tools = (await c.call("tools/list"))["result"]["tools"]
        assert "fresh" in [t["name"] for t in tools]
        called = await c.call("tools/call", {"name": "fresh", "arguments": {"x": 1}})
        assert called["result"]["content"][0]["text"] == 'fresh called with {"x": 1}'


async def test_progress_notifications_carry_the_token(mini_server_argv: list[str]) -> None:
    async with mini(mini_server_argv) as c:
        await c.initialize()
        params = {
            "name": "progress",
            "arguments": {"steps": 3, "interval": 0.01},
            "_meta": {"progressToken": "tok-7"},
        }
        request_id = await c.request("tools/call", params)
        notes = [await c.read() for _ in range(3)]
        assert [n["method"] for n in notes] == ["notifications/progress"] * 3
        assert [n["params"]["progressToken"] for n in notes] == ["tok-7"] * 3
        assert [n["params"]["progress"] for n in notes] == [1, 2, 3]
        reply = await c.read()
        assert reply["id"] == request_id and "result" in reply


async def test_unknown_method_and_unknown_tool_are_errors(mini_server_argv: list[str]) -> None:
    async with mini(mini_server_argv) as c:
        await c.initialize()
        reply = await c.call("resources/list")
        assert reply["error"]["code"] == -32601
        reply = await c.call("tools/call", {"name": "nope", "arguments": {}})
        assert reply["error"]["code"] == -32602


async def test_tool_results(mini_server_argv: list[str]) -> None:
    async with mini(mini_server_argv) as c:
        await c.initialize()

        async def call(name: str, **arguments: Any) -> dict[str, Any]:
            result: dict[str, Any] = (await c.call("tools/call", {"name": name, "arguments": arguments}))[
                "result"
            ]
            return result

        assert (await call("echo", text="hi"))["content"] == [{"type": "text", "text": "hi"}]
        assert (await call("add", a=2, b=3.5))["content"][0]["text"] == "5.5"
        failed = await call("fail")
        assert failed["isError"] is True
        image = (await call("image"))["content"]
        assert [item["type"] for item in image] == ["image", "text"]
        assert image[0]["mimeType"] == "image/png" and image[0]["data"]
        assert len((await call("big", bytes=100_000))["content"][0]["text"]) == 100_000
        assert (await call("add", a=1))["isError"] is True  # a bad argument: tool error


async def test_calls_run_concurrently_and_honour_cancellation(
    mini_server_argv: list[str], tmp_path: Path
) -> None:
    log = tmp_path / "calls.log"
    async with mini(mini_server_argv, "--calls-log", str(log)) as c:
        await c.initialize()
        slow = await c.request("tools/call", {"name": "sleep", "arguments": {"seconds": 0.3}})
        doomed = await c.request("tools/call", {"name": "sleep", "arguments": {"seconds": 30}})
        ping = await c.request("ping")
        assert (await c.read())["id"] == ping  # not stuck behind the sleeps
        await c.send({"method": "notifications/cancelled", "params": {"requestId": doomed, "reason": "test"}})
        reply = await c.read()
        assert reply["id"] == slow
        assert reply["result"]["content"][0]["text"] == "slept"
        # The cancelled call never answers: the next message is the answer to this ping.
        assert (await c.call("ping"))["result"] == {}
        assert any(f"cancelled request {doomed}" in line for line in c.transport.stderr_tail())
        logged = [json.loads(line) for line in log.read_text().splitlines()]
        assert [entry["id"] for entry in logged] == [slow, doomed]


async def test_garbage_and_huge_line_after_initialize(mini_server_argv: list[str]) -> None:
    async with mini(mini_server_argv, "--garbage", "--huge-line", "200000") as c:
        await c.initialize()
        # The transport's framing reports each line that is no message (the connection
        # actor would end the connection at the first); the lines after them still read.
        with pytest.raises(FramingError, match=r"not JSON.*'this is not json'"):
            await c.read()
        with pytest.raises(FramingError, match=r"not JSON.*'xxxxxxxx"):
            await c.read()
        assert (await c.call("ping"))["result"] == {}


async def test_exit_during_init(mini_server_argv: list[str]) -> None:
    async with mini(mini_server_argv, "--exit-during-init") as c:
        await c.request("initialize", {"protocolVersion": "2025-06-18"})
        with pytest.raises(EOFError):
            await c.read()
    assert c.transport.returncode == 1


async def test_flaky_exits_within_its_window(mini_server_argv: list[str]) -> None:
    async with mini(mini_server_argv, "--flaky", "0.2") as c:
        start = trio.current_time()
        await c.initialize()
        with pytest.raises(EOFError):
            await c.read()
        elapsed = trio.current_time() - start
    assert c.transport.returncode == 1
    # 0.5x..1.5x of 0.2 s, plus slack for a loaded machine (it failed once at 0.44 s).
    assert 0.05 <= elapsed <= 0.3 + 1.0
