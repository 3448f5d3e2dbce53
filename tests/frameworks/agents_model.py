"""A scripted OpenAI Agents SDK model (its ``Model`` interface), for the tests that run the
SDK's ``Runner`` (through the gateway, ``tests/frameworks/``, and in-process,
``tests/adapters/``): no language model, no network. It follows a ``Plan``
(``tests/frameworks/scripted.py``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents.items import ModelResponse, TResponseInputItem
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from tests.frameworks.scripted import FINAL, Plan


class Scripted(Model):
    """A model that makes its plan's calls, one a step, then answers ``done``;
    ``offered`` keeps the names of the tools each step was offered."""

    def __init__(self) -> None:
        self.plan: Plan | None = None
        self.offered: list[list[str]] = []

    async def get_response(  # the SDK passes its arguments by name
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **context: Any,
    ) -> ModelResponse:
        assert self.plan is not None
        self.offered.append(sorted(tool.name for tool in tools))
        last = input[-1] if isinstance(input, list) and input else None
        answered = last is not None and last.get("type") == "function_call_output"
        call = await self.plan.next(output_text(last["output"]) if answered else None)  # type: ignore[index]
        if call is None:
            text = ResponseOutputText(type="output_text", text=FINAL, annotations=[])
            item: Any = ResponseOutputMessage(
                id="final", type="message", role="assistant", status="completed", content=[text]
            )
        else:
            number = self.plan.calls
            item = ResponseFunctionToolCall(
                type="function_call",
                name=call.tool,
                arguments=json.dumps(call.arguments),
                call_id=f"call-{number}",
                id=f"fc-{number}",
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the agents here run without streaming")


def output_text(output: Any) -> str:
    """A tool output's text (MCP tools answer with a list of ``input_text`` items)."""
    if isinstance(output, str):
        return output
    items = output if isinstance(output, list) else [output]
    return "".join(item.get("text", "") for item in items if isinstance(item, dict))
