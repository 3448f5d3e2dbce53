"""A scripted LangChain chat model, for the tests that run ``create_agent`` agents (through
the gateway, ``tests/frameworks/``, and in-process, ``tests/adapters/``): no language
model, no network. It follows a ``Plan`` (``tests/frameworks/scripted.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from tests.frameworks.scripted import FINAL


class Scripted(BaseChatModel):
    """A chat model that makes its plan's calls, one a step, then answers ``done``.
    ``create_agent`` binds the tools it offers (``bind_tools``); ``offered`` keeps their
    names, step by step."""

    plan: Any = None
    offered: list[list[str]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Scripted:
        self.offered.append(sorted(getattr(tool, "name", "") for tool in tools))
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("the agents here run asynchronously")

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        call = await self.plan.next(answer_text(last) if isinstance(last, ToolMessage) else None)
        if call is None:
            return said(AIMessage(content=FINAL))
        tool_call = {"name": call.tool, "args": call.arguments, "id": f"call-{self.plan.calls}"}
        return said(AIMessage(content="", tool_calls=[tool_call]))


def said(message: AIMessage) -> ChatResult:
    return ChatResult(generations=[ChatGeneration(message=message)])


def answer_text(message: ToolMessage) -> str:
    """A tool answer's text (LangChain's MCP tools answer with content blocks)."""
    if isinstance(message.content, str):
        return message.content
    return "".join(block["text"] for block in message.content if isinstance(block, dict) and "text" in block)
