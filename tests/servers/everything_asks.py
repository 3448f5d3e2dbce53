"""The conformance fixture's tools that ask the client mid-call: sampling and
elicitation, with the SEP-1034 defaults and SEP-1330 enums forms.

Each asks through a resolver (the SDK's ``Annotated[T, Resolve(fn)]`` with a ``Sample``
or ``Elicit`` marker), so it asks in either era: in the handshake era the SDK sends
``sampling/createMessage`` or ``elicitation/create`` mid-call, in the 2026-07-28 era it
answers the call input-required and runs the tool on the retry with the answer. A tool
that called ``ctx.session.create_message`` or ``ctx.elicit`` itself would work only in
the handshake era (the SDK refuses it in the other: no back-channel).
"""

from __future__ import annotations

from typing import Annotated

from everything_app import server
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp.types import CreateMessageResult, SamplingMessage, TextContent
from pydantic import BaseModel, Field


def ask_model(prompt: str) -> Sample:
    """The tool's ``prompt`` as one user message to the client's model, 100 tokens."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    return Sample([message], max_tokens=100)


@server.tool()
async def test_sampling(prompt: str, said: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """Asks the client's model (sampling/createMessage) and answers what it said."""
    text = said.content.text if said.content.type == "text" else "No response"
    return f"LLM response: {text}"


class Answer(BaseModel):
    response: str = Field(description="User's response")


class Defaults(BaseModel):
    """SEP-1034: a default for every primitive type."""

    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active",
        description="User status",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    verified: bool = Field(default=True, description="Verification status")


def one_of(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in pairs]


class Enums(BaseModel):
    """SEP-1330: every way of writing a choice."""

    untitledSingle: str = Field(
        description="Simple enum without titles",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    titledSingle: str = Field(
        description="Enum with titled options (oneOf)",
        json_schema_extra={
            "oneOf": one_of(("low", "Low Priority"), ("medium", "Medium Priority"), ("high", "High Priority"))
        },
    )
    untitledMulti: list[str] = Field(
        description="Multi-select without titles",
        json_schema_extra={"items": {"type": "string", "enum": ["read", "write", "execute"]}},
    )
    titledMulti: list[str] = Field(
        description="Multi-select with titled options",
        json_schema_extra={
            "items": {
                "anyOf": one_of(("feature", "New Feature"), ("bug", "Bug Fix"), ("docs", "Documentation"))
            }
        },
    )
    legacyEnum: str = Field(
        description="Legacy enum with enumNames",
        json_schema_extra={
            "enum": ["small", "medium", "large"],
            "enumNames": ["Small Size", "Medium Size", "Large Size"],
        },
    )


def outcome(result: ElicitationResult[BaseModel]) -> str:
    """``action=…, content=…`` of one elicitation."""
    content = result.data.model_dump_json() if result.action == "accept" else "{}"
    return f"action={result.action}, content={content}"


def ask_user(message: str) -> Elicit[Answer]:
    """The tool's ``message``, one string asked for."""
    return Elicit(message, Answer)


def ask_defaults() -> Elicit[Defaults]:
    return Elicit("Please provide user information", Defaults)


def ask_enums() -> Elicit[Enums]:
    return Elicit("Please select values using different enum schema types", Enums)


@server.tool()
async def test_elicitation(
    message: str, answer: Annotated[ElicitationResult[Answer], Resolve(ask_user)]
) -> str:
    """Asks the user (elicitation/create) for one string."""
    return f"User response: {outcome(answer)}"


@server.tool()
async def test_elicitation_sep1034_defaults(
    answer: Annotated[ElicitationResult[Defaults], Resolve(ask_defaults)],
) -> str:
    """Asks with a default for every field."""
    return f"Elicitation result: {outcome(answer)}"


@server.tool()
async def test_elicitation_sep1330_enums(
    answer: Annotated[ElicitationResult[Enums], Resolve(ask_enums)],
) -> str:
    """Asks with every kind of enum."""
    return f"Elicitation completed: {outcome(answer)}"
