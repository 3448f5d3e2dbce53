"""An OpenAI Agents SDK agent on the SDK's own MCP client, ``MCPServerStreamableHttp``,
built by the README's recipe and pointed at ``/mcp``; its model scripted
(``Scripted``, the SDK's ``Model`` interface: no language model, no network): a
backend SIGKILLed between two of the agent's calls (and the same agent connected
straight to the backend with ``MCPServerStdio``, the anchor), a call trust asks about
answered through the admin API's approvals (the SDK declares no elicitation), and a
``tool_search`` find called in the same run. The SDK's tracing is off: it would
export to OpenAI."""

from __future__ import annotations

import asyncio
from pathlib import Path

import agents
import trio
from agents import Agent, Runner
from agents.mcp import MCPServerStdio
from mcp.shared.exceptions import MCPError

from tests.frameworks.agents_model import Scripted
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
from tests.frameworks.support import BACKEND, DIRECT, Portal, gateway, in_asyncio, readme_recipe
from tests.support.admin import wait_for

agents.set_tracing_disabled(True)

RECIPE = readme_recipe("MCPServerStreamableHttp(params")


async def test_the_agent_goes_on_across_a_backend_kill_through_the_gateway_and_not_directly(
    tmp_path: Path,
) -> None:
    result, given_s = await recovering_run(tmp_path, RECIPE, Scripted())
    assert result.final_output == FINAL  # the run went on to its end

    # The anchor: the same agent connected straight to the backend, the same kill, as
    # long a wait for it to come back. Should this ever fail, the README's table for
    # these hosts is out of date.
    straight = Scripted()

    async def direct(portal: Portal) -> Exception | None:
        straight.plan = Plan(kill_and_recover("", kill_directly, lambda: asyncio.sleep(given_s)))
        params = {"command": DIRECT[0], "args": list(DIRECT[1:])}
        async with MCPServerStdio(params, name=BACKEND) as server:
            try:
                await Runner.run(Agent(name="assistant", model=straight, mcp_servers=[server]), "go")
            except Exception as error:
                return error
        return None

    raised = await in_asyncio(direct)
    # The call after the kill fails, and the next step's tool listing ends the run.
    assert isinstance(raised, MCPError) and str(raised) == "Connection closed", repr(raised)
    assert [tool for tool, _ in straight.plan.answers] == ["whoami"]  # the model saw nothing after


async def test_a_call_trust_asks_about_waits_for_the_admin_apis_approval(tmp_path: Path) -> None:
    async with gateway(tmp_path, ask=[f"mcp:{BACKEND}:add"]) as gw:
        http = gw.api.http(gw.token)
        scripted, ran = Scripted(), []

        async def agent() -> None:
            script = calls(Call(ADD, {"a": 2, "b": 3}))
            ran.append(await run_readme_agent(gw, RECIPE, scripted, lambda portal: script))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent)
            pending = await wait_for(http, "/v1/approvals", lambda answer: len(answer["approvals"]) == 1)
            (item,) = pending["approvals"]
            assert item["tool"] == ADD and item["arguments"] == {"a": 2, "b": 3}, item
            answered = await http.request("POST", f"/v1/approvals/{item['id']}", json={"decision": "allow"})
            assert answered.status == 204, answered
        [result] = ran
        assert result.final_output == FINAL and scripted.plan.answers == [(ADD, "5")]
        assert await gw.outcomes(ADD) == ["ok"]


async def test_a_tool_search_find_is_offered_and_called_in_the_same_run(tmp_path: Path) -> None:
    async with gateway(tmp_path, tool_search=True) as gw:
        script = calls(Call("tool_search", {"query": "add two numbers"}), Call(ADD, {"a": 2, "b": 3}))
        scripted = Scripted()
        result = await run_readme_agent(gw, RECIPE, scripted, lambda portal: script)
        assert result.final_output == FINAL
        (_, found), (_, added) = scripted.plan.answers
        assert ADD in found and added == "5", scripted.plan.answers
        # The first step was offered tool_search alone; the next step's listing, the find.
        assert scripted.offered[0] == ["tool_search"] and ADD in scripted.offered[1], scripted.offered
        assert await gw.outcomes(ADD) == ["ok"]
