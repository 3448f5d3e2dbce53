"""The FastMCP client through the gateway, built by the README's recipe. It has no agent
loop: the test calls tools in sequence in one client session, as a host's loop would,
with the backend SIGKILLed between two calls, over ``/mcp`` and through
``mcp-supervisor stdio`` (and connected straight to the backend: the anchor); a trust
prompt answered by its elicitation handler; a ``tool_search`` find called in the same
session."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import McpError, ToolError
from mcp.types import CallToolResult

from tests.frameworks.support import (
    BACKEND,
    DIRECT,
    GATEWAY_URL,
    UNAVAILABLE,
    Gateway,
    Portal,
    front_replacements,
    gateway,
    in_asyncio,
    launched_here,
    readme_recipe,
    run_recipe,
    stdio_front,
)

RECIPE = readme_recipe("from fastmcp import Client")
WHOAMI, ECHO, ADD = f"{BACKEND}_whoami", f"{BACKEND}_echo", f"{BACKEND}_add"


async def refuse(*args: Any) -> dict[str, str]:
    """An elicitation handler for the recipe's clients that are not asked anything."""
    raise AssertionError(f"nobody should be asked: {args}")


def recipe(gw: Gateway, ask_user: Any = refuse) -> dict[str, Any]:
    """The README's clients, pointed at this gateway."""
    return run_recipe(RECIPE, {GATEWAY_URL: gw.url}, token=gw.token, ask_user=ask_user)


def text(result: CallToolResult) -> str:
    assert len(result.content) == 1, result
    item = result.content[0]
    assert item.type == "text", item
    return item.text


def pid_of(result: CallToolResult) -> int:
    assert not result.is_error, result
    pid: int = json.loads(text(result))["pid"]
    return pid


async def test_the_session_goes_on_across_a_backend_kill_through_the_gateway_and_not_directly(
    tmp_path: Path,
) -> None:
    async with gateway(tmp_path) as gw:

        async def supervised(portal: Portal) -> tuple[int, str, int]:
            client: Client[Any] = recipe(gw)["client"]
            async with client:
                assert client.initialize_result is None  # "auto": the 2026-07-28 era, no handshake
                first = pid_of(await client.call_tool(WHOAMI, {}))
                await portal.run(gw.kill, first)
                down = await client.call_tool(WHOAMI, {}, raise_on_error=False)
                assert down.is_error, down
                with pytest.raises(ToolError, match=UNAVAILABLE):
                    await client.call_tool(WHOAMI, {})
                await portal.run(gw.steady)
                later = pid_of(await client.call_tool(WHOAMI, {}))
            return first, text(down), later

        first, down, later = await in_asyncio(supervised)
        assert down == UNAVAILABLE and later != first
        assert await gw.outcomes(WHOAMI) == ["ok", "unavailable", "unavailable", "ok"]
        given_s = gw.recovered_in_s

    async def direct(portal: Portal) -> list[str]:
        failures = []
        async with Client(StdioTransport(DIRECT[0], list(DIRECT[1:]), keep_alive=False)) as client:
            os.kill(pid_of(await client.call_tool("whoami", {})), signal.SIGKILL)
            for wait_s in (0, given_s):  # at once, then as long as the gateway needed to be back
                await asyncio.sleep(wait_s)
                with pytest.raises(McpError) as raised:
                    await client.call_tool("whoami", {}, raise_on_error=False)
                failures.append(str(raised.value))
        return failures

    # The anchor: the FastMCP client neither reconnects nor turns the loss into an error
    # result. Should this ever fail, the README's table for these hosts is out of date.
    assert await in_asyncio(direct) == ["Connection closed"] * 2


async def test_the_session_goes_on_across_a_backend_kill_through_the_stdio_front(tmp_path: Path) -> None:
    front = stdio_front(tmp_path)

    async def host(portal: Portal) -> tuple[int, str, int]:
        names = {"token": None, "ask_user": refuse}
        client: Client[Any] = run_recipe(RECIPE, front_replacements(front), **names)["local"]
        launched_here(client.transport, front)
        async with client:
            first = pid_of(await client.call_tool(WHOAMI, {}))
            os.kill(first, signal.SIGKILL)
            await portal.run(front.until_logged, "backoff", 1)  # the front saw it go
            down = await client.call_tool(WHOAMI, {}, raise_on_error=False)
            await portal.run(front.until_logged, "steady", 2)  # and come back
            later = pid_of(await client.call_tool(WHOAMI, {}))
        return first, text(down), later

    first, down, later = await in_asyncio(host)
    assert down == UNAVAILABLE and later != first
    assert front.audit_outcomes(WHOAMI) == ["ok", "unavailable", "ok"]


async def test_a_trust_prompt_reaches_the_clients_elicitation_handler(tmp_path: Path) -> None:
    asked: list[str] = []
    answers = iter(["allow_once", "deny"])

    async def ask_user(message: str, response_type: Any, params: Any, context: Any) -> dict[str, str]:
        asked.append(message)
        return {"decision": next(answers)}

    async with gateway(tmp_path, ask=[f"mcp:{BACKEND}:echo"]) as gw:

        async def host(portal: Portal) -> tuple[CallToolResult, CallToolResult]:
            client: Client[Any] = recipe(gw, ask_user)["asking"]
            async with client:
                assert client.initialize_result is not None  # "legacy": the handshake era
                allowed = await client.call_tool(ECHO, {"text": "one"})
                denied = await client.call_tool(ECHO, {"text": "two"}, raise_on_error=False)
            return allowed, denied

        allowed, denied = await in_asyncio(host)
        assert text(allowed) == "one" and denied.is_error and "denied" in text(denied), denied
        assert len(asked) == 2 and all(f"permission: mcp:{BACKEND}:echo" in message for message in asked)
        assert await gw.outcomes(ECHO) == ["ok", "denied"]


async def test_a_tool_search_find_is_called_in_the_same_session(tmp_path: Path) -> None:
    async with gateway(tmp_path, tool_search=True) as gw:

        async def host(portal: Portal) -> tuple[list[str], str, list[str], str]:
            client: Client[Any] = recipe(gw)["client"]
            async with client:
                before = [tool.name for tool in await client.list_tools()]
                found = text(await client.call_tool("tool_search", {"query": "add two numbers"}))
                after = [tool.name for tool in await client.list_tools()]
                added = text(await client.call_tool(ADD, {"a": 2, "b": 3}))
            return before, found, after, added

        before, found, after, added = await in_asyncio(host)
        assert before == ["tool_search"] and ADD in found and ADD in after, (before, after)
        assert added == "5"
        assert await gw.outcomes(ADD) == ["ok"]
