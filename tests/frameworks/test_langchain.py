"""A LangGraph agent (LangChain's ``create_agent``) on LangChain's own MCP client,
``langchain.mcp.MCPAdapter``, built by the README's recipe and pointed at ``/mcp``; its
model scripted (``Scripted``, no language model, no network): a backend SIGKILLed
between two of the agent's calls (and the same agent connected straight to the
backend, the anchor), trust prompts answered by the client's elicitation handler, and
a ``tool_search`` find called in the same run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fastmcp.client.transports import StdioTransport
from mcp.shared.exceptions import MCPError

from tests.frameworks.langchain_model import Scripted
from tests.frameworks.scripted import (
    ADD,
    FINAL,
    Call,
    Plan,
    calls,
    kill_and_recover,
    kill_directly,
    recovering_run,
    run_readme_agent,
)
from tests.frameworks.support import (
    BACKEND,
    DIRECT,
    GATEWAY_URL,
    Portal,
    gateway,
    in_asyncio,
    readme_recipe,
    run_recipe,
)

# The recipe's import of langchain.mcp warns once that it is in beta.
pytestmark = pytest.mark.filterwarnings("ignore::langchain_core._api.LangChainBetaWarning")
RECIPE = readme_recipe("MCPAdapter(client)")


async def refuse(message: str, response_type: Any, params: Any, context: Any) -> dict[str, Any]:
    raise AssertionError(f"nothing here is asked about, yet: {message}")


async def test_the_agent_goes_on_across_a_backend_kill_through_the_gateway_and_not_directly(
    tmp_path: Path,
) -> None:
    result, given_s = await recovering_run(tmp_path, RECIPE, Scripted(), ask_user=refuse)
    assert result["messages"][-1].content == FINAL  # the run went on to its end

    # The anchor: the README's agent connected straight to the backend (its client on a
    # stdio transport), the same kill, as long a wait for it to come back. Should this
    # ever fail, the README's table for these hosts is out of date.
    straight = Scripted()

    async def direct(portal: Portal) -> Exception | None:
        straight.plan = Plan(kill_and_recover("", kill_directly, lambda: asyncio.sleep(given_s)))
        stdio = StdioTransport(DIRECT[0], list(DIRECT[1:]), keep_alive=False)
        put = {f'"{GATEWAY_URL}"': "stdio"}
        defined = run_recipe(RECIPE, put, stdio=stdio, token=None, model=straight, ask_user=refuse)
        try:
            await defined["ask"]("go")
        except Exception as error:
            return error
        return None

    raised = await in_asyncio(direct)
    assert isinstance(raised, MCPError) and str(raised) == "Connection closed", repr(raised)
    assert [tool for tool, _ in straight.plan.answers] == ["whoami"]  # the run ended at the next call


async def test_trust_prompts_reach_the_agents_user_through_the_clients_elicitation_handler(
    tmp_path: Path,
) -> None:
    asked: list[str] = []
    choices = iter(["allow_once", "deny"])

    async def ask_user(message: str, response_type: Any, params: Any, context: Any) -> dict[str, Any]:
        asked.append(message)
        return {"decision": next(choices)}

    script = calls(Call(ADD, {"a": 2, "b": 3}), Call(ADD, {"a": 4, "b": 5}))
    async with gateway(tmp_path, ask=[f"mcp:{BACKEND}:add"]) as gw:
        scripted = Scripted()
        result = await run_readme_agent(gw, RECIPE, scripted, lambda portal: script, ask_user=ask_user)
        assert result["messages"][-1].content == FINAL
        (_, allowed), (_, denied) = scripted.plan.answers
        assert allowed == "5" and "denied" in denied, scripted.plan.answers
        assert len(asked) == 2, asked
        for message in asked:
            assert f"permission: mcp:{BACKEND}:add" in message and ADD in message, message
        assert await gw.outcomes(ADD) == ["ok", "denied"]


async def test_a_tool_search_find_is_offered_and_called_in_the_same_run(tmp_path: Path) -> None:
    script = calls(Call("tool_search", {"query": "add two numbers"}), Call(ADD, {"a": 2, "b": 3}))
    async with gateway(tmp_path, tool_search=True) as gw:
        scripted = Scripted()
        result = await run_readme_agent(gw, RECIPE, scripted, lambda portal: script, ask_user=refuse)
        assert result["messages"][-1].content == FINAL
        (_, found), (_, added) = scripted.plan.answers
        assert ADD in found and added == "5", scripted.plan.answers
        # The agent was built with tool_search alone; the middleware offered the find.
        assert scripted.offered[0] == ["tool_search"] and ADD in scripted.offered[1], scripted.offered
        assert await gw.outcomes(ADD) == ["ok"]
