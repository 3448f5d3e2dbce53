"""pydantic-ai's own agent loop on ``SupervisedToolset``, in-process: the README's recipe
with a ``FunctionModel`` (no language model, no network) against a real stdio server.
Every outcome reaches the model as the tool's output and the run goes on (a retry
prompt for the model's own mistake, a failed tool for the rest); a ``tool_search`` find
is called on the next step of the same run."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from supervisor.adapters.pydantic_ai import SupervisedToolset
from supervisor.aio import Session, Supervisor
from tests.adapters.support import (
    Approver,
    assert_every_outcome,
    assert_found_then_called,
    every_outcome,
    found_then_called,
    in_session,
    run_readme,
)
from tests.frameworks.scripted import FINAL, Plan


class Scripted:
    """A ``FunctionModel`` that follows ``plan``; ``offered`` keeps the tool names each
    request offered, ``outcomes`` how pydantic-ai returned each call to the model,
    ``announced`` what it told the model besides (a user part)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.offered: list[list[str]] = []
        self.outcomes: list[str] = []
        self.announced: list[str] = []
        self.model = FunctionModel(self._respond)

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.offered.append(sorted(tool.name for tool in info.function_tools))
        returned = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
        # (A step whose tools grew also tells the model which are new, in a user part.)
        self.announced.extend(
            str(part.content) for part in messages[-1].parts if isinstance(part, UserPromptPart)
        )
        if returned:
            self.outcomes.append(returned[-1].outcome)
        answer = str(returned[-1].content) if returned else None
        call = await self.plan.next(answer)
        if call is None:
            return ModelResponse(parts=[TextPart(FINAL)])
        return ModelResponse(parts=[ToolCallPart(call.tool, call.arguments)])


def test_the_readme_agent_reads_every_outcome_as_its_tools_output_and_goes_on(tmp_path: Path) -> None:
    approver = Approver()

    async def run(sup: Supervisor, session: Session) -> Scripted:
        scripted = Scripted(Plan(every_outcome(sup)))
        ran = await run_readme("SupervisedToolset(session)", model=scripted.model, session=session)
        assert ran["result"].output == FINAL  # the run went on to its end
        return scripted

    scripted = in_session(tmp_path, run, approver=approver)
    assert_every_outcome(scripted.plan, approver, tmp_path)
    # The model's own mistake is a retry prompt; denied, rate_limited, unavailable: failed tools.
    assert scripted.outcomes == ["success", "retried", "success", *["failed"] * 4, "success"]
    # A request per call and the last one, each offered every tool (search is off).
    assert len(scripted.offered) == 9 and all("mini_add" in step for step in scripted.offered)


def test_a_tool_search_find_is_called_on_the_next_step_of_the_same_run(tmp_path: Path) -> None:
    scripted = Scripted(Plan(found_then_called()))

    async def run(sup: Supervisor, session: Session) -> list[object]:
        result = await Agent(scripted.model, toolsets=[SupervisedToolset(session)]).run("go")
        assert result.output == FINAL
        messages = result.all_messages()
        return [part.metadata for m in messages for part in m.parts if isinstance(part, ToolReturnPart)]

    found, added = in_session(tmp_path, run, tool_search=True)
    assert_found_then_called(scripted.plan, scripted.offered, tmp_path)
    assert scripted.announced[-1].endswith("now available: `mini_add`, `mini_add_tool`</system>")
    # The whole envelope rides along, for the application.
    assert isinstance(found, dict) and found["ok"] and found["tool"] == "tool_search", found
    assert isinstance(added, dict) and (added["ok"], added["text"]) == (True, "5"), added


def test_a_toolset_needs_a_supervisor_aio_session() -> None:
    with pytest.raises(TypeError, match=r"expected a supervisor.aio Session \(async with sup.session"):
        SupervisedToolset("session")  # type: ignore[arg-type]
