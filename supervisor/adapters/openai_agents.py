"""The OpenAI Agents SDK: a session as an in-process MCP server of the SDK's,
``SupervisedServer(session)``.

    agent = Agent(name="assistant", model=model, mcp_servers=[SupervisedServer(session)])

The SDK asks an agent's MCP servers for their tools (``list_tools``) before each model
call, and turns them into its own ``FunctionTool``s; that ask is the hook through which
an agent's tools can change during a run (``Agent.tools`` is meant to stay as it was),
so this is an ``agents.mcp.MCPServer`` with no connection behind it. Each ``list_tools``
begins a turn of the session and lists its tools, each with the turn's id in its
``_meta``, which the SDK hands back with every call of that tool: a call goes to the turn
the model was shown. A tool that ``tool_search`` finds is activated for the session, and
the next model call's listing shows it: the agent can call it on its next turn of the
same run.

A call's envelope is its tool output (``tool_output.py``): the text of a success, and for
a failure a result flagged ``isError`` whose text is the code and the message, which the
SDK gives the model as the tool's output; the run goes on. The session's lifetime is the
host's ``async with sup.session()``: ``connect`` and ``cleanup`` have nothing to do.
"""

from __future__ import annotations

from typing import Any

from agents import AgentBase, RunContextWrapper
from agents.mcp import MCPServer
from mcp.types import CallToolResult, GetPromptResult, ListPromptsResult
from mcp.types import Tool as MCPTool

from supervisor.adapters.tool_output import error_text, listed_schema, model_text
from supervisor.aio import Envelope, Session, Turn

TURN_META = "mcp-supervisor/turn"
"""The ``_meta`` key of a listed tool that names the turn its calls go to."""
KEPT_TURNS = 64
"""Listings whose calls can still arrive (the SDK may list more than once a step, and a
run paused for approval keeps its step's tools): older turns are forgotten, and a call
naming one goes to the latest listing's turn."""


class SupervisedServer(MCPServer):
    """The tools of a ``supervisor.aio`` session, one turn per listing (module docstring)."""

    def __init__(self, session: Session, *, name: str = "mcp-supervisor") -> None:
        if not isinstance(session, Session):
            raise TypeError(
                "SupervisedServer(session): expected a supervisor.aio Session (async with "
                f"sup.session() as session), got {session!r}"
            )
        super().__init__()
        self._session = session
        self._name = name
        self._turns: dict[str, Turn] = {}
        self._latest: Turn | None = None

    @property
    def name(self) -> str:
        return self._name

    async def connect(self) -> None:
        """Nothing to open: the session is open."""

    async def cleanup(self) -> None:
        """Nothing to close: the host's ``async with`` ends the session."""

    async def list_tools(
        self, run_context: RunContextWrapper[Any] | None = None, agent: AgentBase[Any] | None = None
    ) -> list[MCPTool]:
        """Begin a turn and list its tools, each naming the turn in its ``_meta``."""
        turn = await self._begin_turn()
        return [
            MCPTool.model_validate(
                {
                    "name": item["id"],
                    "description": item["description"],
                    "inputSchema": listed_schema(item),
                    **({"outputSchema": item["output_schema"]} if "output_schema" in item else {}),
                    "_meta": {TURN_META: turn.id},
                }
            )
            for item in turn.listing()
        ]

    async def call_tool(
        self, tool_name: str, arguments: dict[str, Any] | None, meta: dict[str, Any] | None = None
    ) -> CallToolResult:
        """Call the tool in the turn its listing named; the envelope as the tool's result."""
        named = self._turns.get((meta or {}).get(TURN_META, ""))
        turn = named or self._latest or await self._begin_turn()
        envelope = await turn.call(tool_name, arguments)
        return CallToolResult.model_validate(_result(envelope))

    async def list_prompts(self) -> ListPromptsResult:
        """The prompts of the latest listing's turn (named by their ids)."""
        turn = self._latest or await self._begin_turn()
        return ListPromptsResult.model_validate({"prompts": turn.prompt_listing()})

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None) -> GetPromptResult:
        """Get a prompt by its id in the latest listing's turn; a failure raises ``LookupError``
        (``unknown_prompt``) or ``RuntimeError``, saying why."""
        turn = self._latest or await self._begin_turn()
        envelope = await turn.get_prompt(name, arguments)
        if envelope.ok:
            return GetPromptResult.model_validate(envelope.structured)
        assert envelope.error is not None
        failed = LookupError if envelope.error.code == "unknown_prompt" else RuntimeError
        raise failed(error_text(envelope))

    async def _begin_turn(self) -> Turn:
        turn = await self._session.begin_turn()
        self._turns[turn.id], self._latest = turn, turn
        if len(self._turns) > KEPT_TURNS:
            del self._turns[next(iter(self._turns))]
        return turn


def _result(envelope: Envelope) -> dict[str, Any]:
    """A ``CallToolResult`` on the wire: what the model reads as its text."""
    if envelope.ok:
        return {"content": [{"type": "text", "text": model_text(envelope)}], "isError": False}
    return {"content": [{"type": "text", "text": error_text(envelope)}], "isError": True}
