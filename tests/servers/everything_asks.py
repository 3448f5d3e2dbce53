"""The conformance fixture's tools that ask the client mid-call (handshake era):
sampling and elicitation, with the SEP-1034 defaults and SEP-1330 enums forms.
"""

from __future__ import annotations

from everything_app import server
from mcp.server.mcpserver import Context
from mcp.types import SamplingMessage, TextContent
from pydantic import BaseModel, Field


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model (sampling/createMessage) and answers what it said."""
    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    said = result.content.text if result.content.type == "text" else "No response"
    return f"LLM response: {said}"


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


async def elicited(ctx: Context, message: str, schema: type[BaseModel]) -> str:
    """``action=…, content=…`` of one elicitation."""
    result = await ctx.elicit(message=message, schema=schema)
    content = result.data.model_dump_json() if result.action == "accept" else "{}"
    return f"action={result.action}, content={content}"


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user (elicitation/create) for one string."""
    return f"User response: {await elicited(ctx, message, Answer)}"


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Asks with a default for every field."""
    return f"Elicitation result: {await elicited(ctx, 'Please provide user information', Defaults)}"


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Asks with every kind of enum."""
    message = "Please select values using different enum schema types"
    return f"Elicitation completed: {await elicited(ctx, message, Enums)}"
