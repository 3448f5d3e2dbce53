"""An OpenAI Agents SDK agent on ``SupervisedServer``, in-process: the README's recipe
run by ``Runner`` with a scripted ``Model`` (no language model, no network) against a
real stdio server. Every outcome reaches the model as the tool's output and the run
goes on; a ``tool_search`` find is called on the next step of the same run; a call goes
to the turn its listing named. The SDK's tracing is off: it would export to OpenAI."""

from __future__ import annotations

from pathlib import Path

import agents
import pytest
from agents import Agent, Runner

from actors.connection.messages import Control
from actors.connection.states import State
from supervisor.adapters.openai_agents import TURN_META, SupervisedServer
from supervisor.aio import Session, Supervisor
from tests.adapters.support import (
    ADD,
    SERVER,
    UNAVAILABLE,
    Approver,
    assert_every_outcome,
    assert_found_then_called,
    every_outcome,
    found_then_called,
    in_session,
    run_readme,
)
from tests.frameworks.agents_model import Scripted
from tests.frameworks.scripted import FINAL, Plan
from tests.support.aio_host import state_of

agents.set_tracing_disabled(True)


def test_the_readme_agent_reads_every_outcome_as_its_tools_output_and_goes_on(tmp_path: Path) -> None:
    approver, scripted = Approver(), Scripted()

    async def run(sup: Supervisor, session: Session) -> None:
        scripted.plan = Plan(every_outcome(sup))
        ran = await run_readme("SupervisedServer(session)", model=scripted, session=session)
        assert ran["result"].final_output == FINAL  # the run went on to its end

    in_session(tmp_path, run, approver=approver)
    assert scripted.plan is not None
    assert_every_outcome(scripted.plan, approver, tmp_path)


def test_a_tool_search_find_is_called_on_the_next_step_of_the_same_run(tmp_path: Path) -> None:
    scripted = Scripted()
    scripted.plan = Plan(found_then_called())

    async def run(sup: Supervisor, session: Session) -> None:
        agent = Agent(name="assistant", model=scripted, mcp_servers=[SupervisedServer(session)])
        assert (await Runner.run(agent, "go")).final_output == FINAL

    in_session(tmp_path, run, tool_search=True)
    assert_found_then_called(scripted.plan, scripted.offered, tmp_path)


def test_a_call_goes_to_the_turn_its_listing_named(tmp_path: Path) -> None:
    """One listing while the server serves, one while it is disabled; with the server back,
    a call of the first listing's tool is sent and one of the second's is refused (its
    turn began with the server down), whichever listing came last."""

    async def run(sup: Supervisor, session: Session) -> None:
        server = SupervisedServer(session)
        await server.connect()
        serving = {tool.name: tool for tool in await server.list_tools()}
        await sup.command(SERVER, Control.DISABLE)
        await state_of(sup, SERVER, State.DISABLED)
        down = {tool.name: tool for tool in await server.list_tools()}
        await sup.command(SERVER, Control.ENABLE)
        await state_of(sup, SERVER, State.STEADY)
        arguments = {"a": 2, "b": 3}
        sent = await server.call_tool(ADD, arguments, meta=serving[ADD].meta)
        refused = await server.call_tool(ADD, arguments, meta=down[ADD].meta)
        latest = await server.call_tool(ADD, arguments)  # no _meta: the latest listing's turn
        await server.cleanup()
        assert serving[ADD].meta is not None and down[ADD].meta is not None
        assert serving[ADD].meta[TURN_META] != down[ADD].meta[TURN_META]
        assert (sent.is_error, sent.content[0].text) == (False, "5"), sent
        assert refused.is_error and refused.content[0].text.startswith(f"{UNAVAILABLE} in this turn")
        assert latest.is_error and latest.content[0].text == refused.content[0].text

    in_session(tmp_path, run)


def test_the_prompts_of_the_latest_listings_turn(tmp_path: Path) -> None:
    async def run(sup: Supervisor, session: Session) -> None:
        server = SupervisedServer(session)
        (prompt,) = (await server.list_prompts()).prompts
        assert (prompt.name, prompt.description) == (f"{SERVER}_greet", "Greet someone.")
        (message,) = (await server.get_prompt(f"{SERVER}_greet", {"who": "Ada"})).messages
        assert message.content.text == "Hello, Ada"
        with pytest.raises(LookupError, match=f"unknown_prompt: unknown prompt {SERVER}_nope"):
            await server.get_prompt(f"{SERVER}_nope")
        with pytest.raises(RuntimeError, match=r"invalid_arguments: .* mini_greet: \$.who"):
            await server.get_prompt(f"{SERVER}_greet")

    in_session(tmp_path, run, surface=True)
    with pytest.raises(TypeError, match=r"SupervisedServer\(session\): expected a supervisor.aio Session"):
        SupervisedServer(object())  # type: ignore[arg-type]
