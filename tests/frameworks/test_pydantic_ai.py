"""pydantic-ai's own agent loop through the gateway, its model scripted with
``FunctionModel`` (no language model, no network), its toolset built by the README's
recipes: a backend SIGKILLed between two of the agent's calls (and the same agent
connected straight to the backend, the anchor), a trust prompt answered by its
elicitation handler, and a ``tool_search`` find called in the same run."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

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

ADD, WHOAMI = f"{BACKEND}_add", f"{BACKEND}_whoami"
Step = Callable[[Sequence[ToolReturnPart]], Awaitable[None]]
HTTP_RECIPE = readme_recipe("agent = Agent(model, toolsets=[supervised])")
SEARCH_RECIPE = readme_recipe("searching = MCPToolset(")
STDIO_RECIPE = readme_recipe("MCPToolset(front, elicitation_handler=ask_user)")


def tool_returns(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    """What the agent's tool calls answered so far, in order (errors included: a failed
    MCP call comes back as a ``ToolReturnPart`` whose outcome is ``retried``)."""
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def scripted(
    calls: Sequence[tuple[str, dict[str, Any]]],
    before: Sequence[Step] = (),
    shown: list[list[str]] | None = None,
) -> FunctionModel:
    """A model that makes ``calls`` one per request, then answers ``done``; ``before[n]``
    runs (given the answers so far) before call ``n + 1`` is made; ``shown`` gets the
    tool names each request offered."""

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if shown is not None:
            shown.append(sorted(tool.name for tool in info.function_tools))
        answered = tool_returns(messages)
        if len(answered) == len(calls):
            return ModelResponse(parts=[TextPart("done")])
        if 0 < len(answered) <= len(before):
            await before[len(answered) - 1](answered)
        tool, arguments = calls[len(answered)]
        return ModelResponse(parts=[ToolCallPart(tool, arguments)])

    return FunctionModel(model)


def pid_of(part: ToolReturnPart) -> int:
    assert part.outcome == "success", part
    pid: int = part.content["pid"]
    return pid


def kill_then_back(gw: Gateway, portal: Portal) -> list[Step]:
    """Steps for ``scripted``: SIGKILL the backend whose pid the first call answered;
    after the next call, wait until the backend is back."""

    async def kill(answered: Sequence[ToolReturnPart]) -> None:
        await portal.run(gw.kill, pid_of(answered[0]))

    async def back(answered: Sequence[ToolReturnPart]) -> None:
        await portal.run(gw.steady)

    return [kill, back]


async def run_agent(agent: Agent[None, str]) -> list[ToolReturnPart]:
    """One run of ``agent``; what its tool calls answered."""
    async with agent:
        result = await agent.run("go")
    assert result.output == "done"
    return tool_returns(result.all_messages())


async def test_the_agent_goes_on_across_a_backend_kill_through_the_gateway_and_not_directly(
    tmp_path: Path,
) -> None:
    async with gateway(tmp_path) as gw:

        async def supervised(portal: Portal) -> list[ToolReturnPart]:
            model = scripted([(WHOAMI, {})] * 3, kill_then_back(gw, portal))
            return await run_agent(
                run_recipe(HTTP_RECIPE, {GATEWAY_URL: gw.url}, token=gw.token, model=model)["agent"]
            )

        first, down, later = await in_asyncio(supervised)
        # The call made while the backend was down reached the agent as a tool error it
        # may retry; the one after the reconnect reached the new backend process.
        assert (down.outcome, down.content) == ("retried", UNAVAILABLE), down
        assert pid_of(later) != pid_of(first)
        assert await gw.outcomes(WHOAMI) == ["ok", "unavailable", "ok"]
        given_s = gw.recovered_in_s

    async def direct(portal: Portal) -> list[ToolReturnPart]:
        async def kill(answered: Sequence[ToolReturnPart]) -> None:
            os.kill(pid_of(answered[0]), signal.SIGKILL)

        async def wait(answered: Sequence[ToolReturnPart]) -> None:
            await asyncio.sleep(given_s)  # as long as the gateway needed to be back

        # Retries enough for the later call to be made at all (one by default).
        straight = MCPToolset(StdioTransport(DIRECT[0], list(DIRECT[1:]), keep_alive=False), max_retries=2)
        return await run_agent(Agent(scripted([("whoami", {})] * 3, [kill, wait]), toolsets=[straight]))

    first, down, later = await in_asyncio(direct)
    assert first.outcome == "success"
    # The anchor: nothing in pydantic-ai reconnects. Should this ever fail, the README's
    # table for these hosts is out of date.
    assert [(part.outcome, part.content) for part in (down, later)] == [("retried", "Connection closed")] * 2


async def test_a_trust_prompt_reaches_the_agents_user_through_its_elicitation_handler(tmp_path: Path) -> None:
    front = stdio_front(tmp_path, ask=[f"mcp:{BACKEND}:echo"])
    asked: list[str] = []
    answers = iter(["allow_once", "deny"])

    async def ask_user(message: str, response_type: Any, params: Any, context: Any) -> dict[str, Any]:
        asked.append(message)
        return {"decision": next(answers)}

    async def agent(portal: Portal) -> list[ToolReturnPart]:
        recipe = run_recipe(STDIO_RECIPE, front_replacements(front), MCPToolset=MCPToolset, ask_user=ask_user)
        launched_here(recipe["front"], front)
        echo = f"{BACKEND}_echo"
        model = scripted([(echo, {"text": "one"}), (echo, {"text": "two"})])
        return await run_agent(Agent(model, toolsets=[recipe["supervised"]]))

    allowed, denied = await in_asyncio(agent)
    assert (allowed.outcome, allowed.content) == ("success", "one"), allowed
    assert denied.outcome == "retried" and "denied" in denied.content, denied
    assert len(asked) == 2 and all(f"permission: mcp:{BACKEND}:echo" in message for message in asked), asked
    assert front.audit_outcomes(f"{BACKEND}_echo") == ["ok", "denied"]


def searching(gw: Gateway) -> MCPToolset[None]:
    """The README's toolset for ``tool_search``: it lists before each model request."""
    recipe = run_recipe(SEARCH_RECIPE, {GATEWAY_URL: gw.url}, MCPToolset=MCPToolset, token=gw.token)
    toolset: MCPToolset[None] = recipe["searching"]
    return toolset


async def test_a_tool_search_find_is_called_in_the_same_run(tmp_path: Path) -> None:
    async with gateway(tmp_path, tool_search=True) as gw:
        shown: list[list[str]] = []
        model = scripted(
            [("tool_search", {"query": "add two numbers"}), (ADD, {"a": 2, "b": 3})], shown=shown
        )

        async def agent(portal: Portal) -> list[ToolReturnPart]:
            return await run_agent(Agent(model, toolsets=[searching(gw)]))

        searched, added = await in_asyncio(agent)
        assert ADD in str(searched.content)
        assert (added.outcome, added.content) == ("success", "5"), added
        assert shown[0] == ["tool_search"] and ADD in shown[1], shown
        assert await gw.outcomes(ADD) == ["ok"]


async def test_listing_before_each_request_a_step_listed_while_down_works_once_it_is_back(
    tmp_path: Path,
) -> None:
    """``cache_tools=False`` (the README's search toolset): the step listed while the
    backend was down calls it after the reconnect, and the call works (the gateway
    begins a new turn for it); only the call made while down failed."""
    async with gateway(tmp_path) as gw:

        async def agent(portal: Portal) -> list[ToolReturnPart]:
            model = scripted([(WHOAMI, {})] * 4, kill_then_back(gw, portal))
            return await run_agent(Agent(model, toolsets=[searching(gw)]))

        first, down, listed_while_down, later = await in_asyncio(agent)
        assert (down.outcome, down.content) == ("retried", UNAVAILABLE), down
        assert listed_while_down.outcome == "success", listed_while_down
        assert pid_of(listed_while_down) != pid_of(first) and pid_of(later) == pid_of(listed_while_down)
        assert await gw.outcomes(WHOAMI) == ["ok", "unavailable", "ok", "ok"]
