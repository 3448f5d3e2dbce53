"""A LangGraph agent (LangChain's ``create_agent``) on ``SupervisedToolsMiddleware``,
in-process: the README's recipe with a scripted chat model (no language model, no
network) against a real stdio server. Every outcome reaches the model as a
``ToolMessage`` and the run goes on; a ``tool_search`` find is called on the next step
of the same run; ``tools_of`` gives one turn's tools as ``BaseTool``s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage

from supervisor.adapters.langchain import SupervisedToolsMiddleware, tools_of
from supervisor.aio import Session, Supervisor
from tests.adapters.support import (
    ADD,
    FIVE,
    Approver,
    assert_every_outcome,
    assert_found_then_called,
    every_outcome,
    found_then_called,
    in_session,
    run_readme,
)
from tests.frameworks.langchain_model import Scripted
from tests.frameworks.scripted import FINAL, Plan, calls


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [message for message in state["messages"] if isinstance(message, ToolMessage)]


def test_the_readme_agent_reads_every_outcome_as_a_tool_message_and_goes_on(tmp_path: Path) -> None:
    approver, scripted = Approver(), Scripted()

    async def run(sup: Supervisor, session: Session) -> dict[str, Any]:
        scripted.plan = Plan(every_outcome(sup))
        ran = await run_readme("SupervisedToolsMiddleware(session)", model=scripted, session=session)
        state: dict[str, Any] = ran["state"]
        assert state["messages"][-1].content == FINAL  # the run went on to its end
        return state

    state = in_session(tmp_path, run, approver=approver)
    assert_every_outcome(scripted.plan, approver, tmp_path)
    # Failures are ToolMessages with status "error"; a success carries the envelope.
    answered = tool_messages(state)
    statuses = [message.status for message in answered]
    assert statuses == ["success", "error", "success", *["error"] * 4, "success"], statuses
    assert answered[0].artifact["ok"] and answered[0].artifact["tool"] == ADD, answered[0].artifact


def test_a_tool_search_find_is_called_on_the_next_step_of_the_same_run(tmp_path: Path) -> None:
    scripted = Scripted()
    scripted.plan = Plan(found_then_called())

    async def run(sup: Supervisor, session: Session) -> None:
        agent = create_agent(scripted, middleware=[SupervisedToolsMiddleware(session)])
        state = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})
        assert state["messages"][-1].content == FINAL

    in_session(tmp_path, run, tool_search=True)
    assert_found_then_called(scripted.plan, scripted.offered, tmp_path)


def test_the_tools_of_one_turn_are_langchain_tools_that_call_in_that_turn(tmp_path: Path) -> None:
    scripted = Scripted()
    scripted.plan = Plan(calls(FIVE))

    async def run(sup: Supervisor, session: Session) -> None:
        turn = await session.begin_turn()
        tools = {tool.name: tool for tool in tools_of(turn)}
        add = tools[ADD]
        assert add.description == "Add two numbers."
        assert add.args == {"a": {"type": "number"}, "b": {"type": "number"}}
        call = {"type": "tool_call", "id": "c1", "name": ADD, "args": {"a": 2, "b": 3}}
        answer = await add.ainvoke(call)
        assert (answer.content, answer.status, answer.artifact["text"]) == ("5", "success", "5")
        with pytest.raises(NotImplementedError, match=rf"{ADD} is a supervisor.aio tool .*\(tool.ainvoke"):
            add.invoke({"a": 2, "b": 3})
        # An agent built with a fixed list of them: its calls go to that turn.
        state = await create_agent(scripted, list(tools.values())).ainvoke({"messages": [("user", "go")]})
        assert [message.content for message in tool_messages(state)] == ["5"]
        assert (await session.begin_turn()).id.endswith("-2")  # no other turn began

    in_session(tmp_path, run)
    with pytest.raises(TypeError, match=r"tools_of\(turn\): expected a supervisor.aio Turn"):
        tools_of("turn")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"SupervisedToolsMiddleware\(session\): expected a supervisor.aio"):
        SupervisedToolsMiddleware(None)  # type: ignore[arg-type]
