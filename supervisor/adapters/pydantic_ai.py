"""pydantic-ai: a session's tools as a toolset, ``SupervisedToolset(session)``.

    agent = Agent(model, toolsets=[SupervisedToolset(session)])

pydantic-ai asks a toolset for its tools (``get_tools``) before each model request of a
run; the first ask of each run step begins a turn of the session, and the step's tools
are that turn's (each carrying it), so the model is shown one frozen view per step and
its calls go to the turn it was shown. A tool that ``tool_search`` finds is activated
for the session, so the next step's turn shows it: the model can call it on its next
step of the same run.

A call's envelope is its tool output (``tool_output.py``): on success the text, returned
as a ``ToolReturn`` whose ``metadata`` is the whole envelope (which pydantic-ai keeps
for the application, not the model). A failure is raised as pydantic-ai's ``ModelRetry``
when the model can fix it (``invalid_arguments``, ``unknown_tool``: a retry prompt, and
it counts against the tool's retries as pydantic-ai's own argument checks do), and as
``ToolFailed`` for everything else (``unavailable``, ``denied``, ``timeout``, ``busy``,
``rate_limited``, ``tool_error``…): the model reads it, no retry is spent, the run goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai import ModelRetry, RunContext, ToolFailed, ToolReturn
from pydantic_ai.tools import AgentDepsT, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from supervisor.adapters.tool_output import CORRECTABLE, error_text, model_text
from supervisor.aio import Session, Turn

ANY_OBJECT = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))
"""Arguments reach the turn as the model sent them (an object): the turn validates them
against the tool's schema, under the draft the schema names."""


@dataclass(kw_only=True)
class TurnTool(ToolsetTool[AgentDepsT]):
    """A tool of one step, with the turn its calls go to."""

    turn: Turn


class SupervisedToolset(AbstractToolset[AgentDepsT]):
    """The tools of a ``supervisor.aio`` session, one turn per run step (module docstring).

    ``max_retries``: how often the model may retry a call it got wrong (None: the
    agent's setting). ``id``: the toolset's id, needed by durable execution."""

    def __init__(self, session: Session, *, max_retries: int | None = None, id: str | None = None) -> None:
        if not isinstance(session, Session):
            raise TypeError(
                "SupervisedToolset(session): expected a supervisor.aio Session (async with "
                f"sup.session() as session), got {session!r}"
            )
        self._session = session
        self._max_retries = max_retries
        self._id = id
        self._step: tuple[str | None, int] | None = None
        self._turn: Turn | None = None

    @property
    def id(self) -> str | None:
        return self._id

    async def step_turn(self, ctx: RunContext[AgentDepsT]) -> Turn:
        """The turn of this run step: begun by the step's first ask."""
        step = (ctx.run_id, ctx.run_step)
        if self._turn is None or self._step != step:
            self._turn, self._step = await self._session.begin_turn(), step
        return self._turn

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        turn = await self.step_turn(ctx)
        retries = ctx.max_retries if self._max_retries is None else self._max_retries
        tools: dict[str, ToolsetTool[AgentDepsT]] = {}
        for item in turn.listing():
            definition = ToolDefinition(
                name=item["id"],
                description=item["description"],
                parameters_json_schema=item["input_schema"],
                return_schema=item.get("output_schema"),
            )
            tools[item["id"]] = TurnTool(
                toolset=self, tool_def=definition, max_retries=retries, args_validator=ANY_OBJECT, turn=turn
            )
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> ToolReturn[str]:
        turn = tool.turn if isinstance(tool, TurnTool) else await self.step_turn(ctx)
        envelope = await turn.call(name, tool_args)
        if envelope.ok:
            return ToolReturn(return_value=model_text(envelope), metadata=envelope.as_dict())
        assert envelope.error is not None
        if envelope.error.code in CORRECTABLE:
            raise ModelRetry(error_text(envelope))
        raise ToolFailed(error_text(envelope))
