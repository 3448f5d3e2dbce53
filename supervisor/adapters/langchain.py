"""LangChain: a turn's tools as ``BaseTool``s (``tools_of(turn)``), and a middleware that
begins a turn for each model call of a LangGraph agent (``SupervisedToolsMiddleware``).

    agent = create_agent(model, middleware=[SupervisedToolsMiddleware(session)])

``create_agent`` calls the model once per step, through its middleware's
``awrap_model_call``: there the middleware begins a turn of the session and adds that
turn's tools to the ones the model is offered. The tool calls of the model's answer go
to that turn (``awrap_tool_call`` hands LangGraph's tool node the tool of the step that
offered it, found by the call's id), so what the model was shown stays what its calls
meet. A tool that ``tool_search`` finds is activated for the session, and the next model
call's turn offers it: the agent can call it on its next step of the same run.

``tools_of(turn)`` alone gives the tools of one turn, for a host that begins its turns
itself (or an agent whose tools do not change: search off).

A call's envelope is its tool output (``tool_output.py``). On success the ``ToolMessage``
holds the text, and its ``artifact`` the whole envelope (which LangChain keeps for the
application, not the model). A failure is a ``ToolException`` the tool handles itself
(``handle_tool_error``): a ``ToolMessage`` with status ``error`` whose content is the code
and the message; the run goes on. The tools are asynchronous only (``ainvoke``,
``agent.ainvoke``/``astream``), since ``supervisor.aio`` runs on the host's asyncio loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from supervisor.adapters.tool_output import error_text, listed_schema, model_text
from supervisor.aio import Session, Turn

SYNC_REFUSED = (
    "{name} is a supervisor.aio tool and runs on the host's asyncio loop: invoke it "
    "asynchronously (tool.ainvoke, agent.ainvoke or agent.astream)"
)
KEPT_CALLS = 1024
"""Tool calls a model made that LangGraph has not run yet (an interrupted run's stay
here): the oldest are forgotten beyond this many."""


class SupervisedTool(BaseTool):
    """One tool of one turn; its calls go to that turn."""

    turn: Turn

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(SYNC_REFUSED.format(name=self.name))

    # ``this``, positional-only: the model's arguments are keywords, and one may be ``self``.
    async def _arun(this, /, **arguments: Any) -> tuple[str, dict[str, Any]]:
        envelope = await this.turn.call(this.name, arguments)
        if not envelope.ok:
            raise ToolException(error_text(envelope))
        return model_text(envelope), envelope.as_dict()


def tools_of(turn: Turn) -> list[BaseTool]:
    """The tools the turn shows (``turn.listing()``), as LangChain tools."""
    if not isinstance(turn, Turn):
        raise TypeError(
            f"tools_of(turn): expected a supervisor.aio Turn (await session.begin_turn()), got {turn!r}"
        )
    return [_tool(turn, item) for item in turn.listing()]


def _tool(turn: Turn, item: Mapping[str, Any]) -> SupervisedTool:
    return SupervisedTool(
        name=item["id"],
        description=item["description"],
        args_schema=listed_schema(item),
        response_format="content_and_artifact",  # the envelope as the ToolMessage's artifact
        handle_tool_error=True,  # a failed call is the ToolMessage the model reads
        turn=turn,
    )


class SupervisedToolsMiddleware(AgentMiddleware):
    """The tools of a ``supervisor.aio`` session for ``create_agent``, one turn per model
    call (module docstring)."""

    def __init__(self, session: Session) -> None:
        if not isinstance(session, Session):
            raise TypeError(
                "SupervisedToolsMiddleware(session): expected a supervisor.aio Session (async with "
                f"sup.session() as session), got {session!r}"
            )
        super().__init__()
        self.tools = []  # none registered up front: each model call adds its turn's
        self._session = session
        self._latest: dict[str, BaseTool] = {}
        self._calls: dict[str, BaseTool] = {}

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Begin this step's turn, offer its tools, and note which tool each call names."""
        offered = {tool.name: tool for tool in tools_of(await self._session.begin_turn())}
        self._latest = offered
        response = await handler(request.override(tools=[*request.tools, *offered.values()]))
        for message in response.result:
            for call in message.tool_calls if isinstance(message, AIMessage) else ():
                tool = offered.get(call["name"])
                if tool is not None and call["id"] is not None:
                    self._calls[call["id"]] = tool
                    if len(self._calls) > KEPT_CALLS:
                        del self._calls[next(iter(self._calls))]
        return response

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Run a call of ours with the tool of the step that offered it."""
        call = request.tool_call
        tool = self._calls.pop(call["id"], None) if call["id"] is not None else None
        if tool is None and request.tool is None:  # made where we saw no model call: the latest step's
            tool = self._latest.get(call["name"])
        return await handler(request if tool is None else request.override(tool=tool))
