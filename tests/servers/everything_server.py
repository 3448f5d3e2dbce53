"""The conformance fixture: an MCP server of ours with everything the conformance
suite's SERVER scenarios assume (``@modelcontextprotocol/conformance`` 0.1.16 and
0.2.0-alpha.12), built on the official Python SDK's ``MCPServer``.

    python tests/servers/everything_server.py              # stdio
    python tests/servers/everything_server.py --http 3001  # Streamable HTTP at /mcp

The SDK serves both protocol eras on one endpoint (``initialize`` sessions and the
per-request 2026-07-28 era). ``.ci/conformance`` runs the server scenarios against this
fixture directly (so the fixture is honest) and through ``mcp-supervisor serve``'s
``/mcp`` with this fixture behind it over stdio; tests/test_everything_fixture.py
checks that the tools do what the scenarios look for. The names, texts and payloads
below are the scenarios' contract: change them only with the suite.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequest,
    InputRequiredResult,
    JSONRPCMessage,
    ListRootsRequest,
    ListRootsResult,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: tests/ too
from schema_fixtures import SUITE_FOCAL

PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_EMPTY = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
SIMPLE_TEXT = "This is a simple text response for testing."
ERROR_TEXT = "This tool intentionally returns an error for testing"
STEP = 0.05  # seconds between a tool's log or progress messages

# A fixed key: request state must survive a restart of this test fixture, nothing more.
server = MCPServer(
    name="trio-mcp-supervisor-everything",
    version="1.0.0",
    request_state_security=RequestStateSecurity(keys=[b"trio-mcp-supervisor conformance fixture key"]),
)
subscribed: set[str] = set()


class SseEvents(EventStore):
    """Every event in memory, so a client may resume a stream (``Last-Event-ID``)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = str(len(self.events) + 1)
        self.events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for s, e, _ in self.events if e == last_event_id), None)
        if stream is None:
            return None
        for stream_id, event_id, message in self.events[int(last_event_id) :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


# ------------------------------------------------------------------ content tools


def text_resource(uri: str, text: str, mime: str = "text/plain") -> EmbeddedResource:
    return EmbeddedResource(
        type="resource", resource=TextResourceContents(uri=uri, mime_type=mime, text=text)
    )


@server.tool()
def test_simple_text() -> str:
    """Answers one text item."""
    return SIMPLE_TEXT


@server.tool()
def test_image_content() -> list[ImageContent]:
    """Answers one PNG image."""
    return [ImageContent(type="image", data=PNG_1X1, mime_type="image/png")]


@server.tool()
def test_audio_content() -> list[AudioContent]:
    """Answers one WAV clip."""
    return [AudioContent(type="audio", data=WAV_EMPTY, mime_type="audio/wav")]


@server.tool()
def test_embedded_resource() -> list[EmbeddedResource]:
    """Answers one embedded text resource."""
    return [text_resource("test://embedded-resource", "This is an embedded resource content.")]


@server.tool()
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Answers text, an image and an embedded JSON resource."""
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PNG_1X1, mime_type="image/png"),
        text_resource("test://mixed-content-resource", '{"test": "data", "value": 123}', "application/json"),
    ]


@server.tool()
def test_error_handling() -> str:
    """Fails on purpose: the client sees isError: true with this text (a ToolError: the
    SDK keeps any other exception's text on the server)."""
    raise ToolError(ERROR_TEXT)


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three log messages while it runs."""
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(text)
        await anyio.sleep(STEP)
    return "Tool with logging executed successfully"


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50, 100 of 100; answers the progress token it was given."""
    for done in (0, 50, 100):
        await ctx.report_progress(progress=done, total=100, message=f"Completed step {done} of 100")
        await anyio.sleep(STEP)
    meta = ctx.request_context.meta if ctx.request_context else None
    return str(meta.get("progress_token") if meta else 0)


@server.tool()
async def test_reconnection(ctx: Context) -> str:
    """Closes its SSE stream mid-call (the client resumes it), then answers."""
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await anyio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability: a JSON-RPC error naming it otherwise."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="test_missing_capability needs the client's sampling capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return "The client declared sampling."


# ------------------------------------------------- requests to the client (handshake era)


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


# ------------------------------------------- input-required results (2026-07-28 era)


def ask(message: str, **fields: str) -> ElicitRequest:
    """A form elicitation for required fields of the given JSON types."""
    schema = {
        "type": "object",
        "properties": {k: {"type": t} for k, t in fields.items()},
        "required": list(fields),
    }
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def sample(text: str, max_tokens: int) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    return CreateMessageRequest(params=CreateMessageRequestParams(messages=[message], max_tokens=max_tokens))


def field(answer: object, name: str) -> Any:
    """A field of an accepted elicitation's content, else None."""
    return answer.content.get(name) if isinstance(answer, ElicitResult) and answer.content else None


def answers(ctx: Context) -> Mapping[str, Any]:
    return ctx.input_responses or {}


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    """One elicitation round, then a greeting."""
    if "user_name" in answers(ctx):
        return f"Hello, {field(answers(ctx)['user_name'], 'name') or 'stranger'}!"
    return InputRequiredResult(input_requests={"user_name": ask("What is your name?", name="string")})


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
    """One sampling round, then what the model said."""
    answer = answers(ctx).get("capital_question")
    if answer is not None:
        text = (
            answer.content.text
            if isinstance(answer, CreateMessageResult) and answer.content.type == "text"
            else "?"
        )
        return f"Model said: {text}"
    return InputRequiredResult(
        input_requests={"capital_question": sample("What is the capital of France?", 100)}
    )


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
    """One roots/list round, then how many roots."""
    answer = answers(ctx).get("client_roots")
    if answer is not None:
        return f"Client exposed {len(answer.roots) if isinstance(answer, ListRootsResult) else 0} root(s)."
    return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
    """Its request state must come back unchanged with the answer."""
    if "confirm" in answers(ctx) and ctx.request_state == "request-state-nonce":
        return "state-ok: confirmation received"
    return InputRequiredResult(
        input_requests={"confirm": ask("Please confirm", ok="boolean")}, request_state="request-state-nonce"
    )


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
    """Elicitation, sampling and roots in one round."""
    if {"user_name", "greeting", "client_roots"} <= answers(ctx).keys():
        return "All inputs received."
    return InputRequiredResult(
        input_requests={
            "user_name": ask("What is your name?", name="string"),
            "greeting": sample("Generate a greeting", 50),
            "client_roots": ListRootsRequest(),
        },
        request_state="multiple-inputs",
    )


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
    """Three rounds, the request state saying which; anything unexpected starts over."""
    state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
    got = answers(ctx)
    if state["round"] == 1 and "step1" in got:
        return InputRequiredResult(
            input_requests={"step2": ask("Step 2: What is your favorite color?", color="string")},
            request_state=json.dumps({"round": 2, "name": field(got["step1"], "name")}),
        )
    if state["round"] == 2 and "step2" in got:
        return f"{state.get('name')} likes {field(got['step2'], 'color')}."
    return InputRequiredResult(
        input_requests={"step1": ask("Step 1: What is your name?", name="string")},
        request_state=json.dumps({"round": 1}),
    )


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
    """The SDK refuses a request state that is not the one it sealed."""
    if ctx.request_state is None:
        return InputRequiredResult(
            input_requests={"confirm": ask("Please confirm", ok="boolean")}, request_state="round-1"
        )
    return f"state-ok: {ctx.request_state}"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> InputRequiredResult:
    """Asks only for what the client declared it can answer."""
    caps = ctx.client_capabilities
    wanted: dict[str, InputRequest] = {}
    if caps is None or caps.sampling is not None:
        wanted["sample"] = sample("Say hello", 50)
    if caps is None or caps.elicitation is not None:
        wanted["ask"] = ask("What is your name?", name="string")
    return InputRequiredResult(input_requests=wanted, request_state="capability-gated")


# ------------------------------------------------------------------ schemas, headers

# The suite's own focal schema (tests/schema_fixtures.py, shared with the schema tests).
SCHEMA_2020_12: dict[str, Any] = SUITE_FOCAL


@server.tool(name="json_schema_2020_12_tool")
def json_schema_2020_12_tool() -> str:
    """Lists a JSON Schema 2020-12 input schema with every keyword the scenario checks."""
    return "json_schema_2020_12_tool"


# MCPServer derives input schemas from signatures; this one is given verbatim.
_listed = server._tool_manager.get_tool("json_schema_2020_12_tool")
assert _listed is not None
_listed.parameters = SCHEMA_2020_12


@server.tool()
def test_x_mcp_header(
    region: str = Field(default="<none>", json_schema_extra={"x-mcp-header": "Region"}),
) -> str:
    """Declares an ``x-mcp-header`` parameter (mirrored into ``Mcp-Param-Region``)."""
    return f"region={region}"


# ------------------------------------------------------------------ resources, prompts


@server.resource("test://static-text")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary")
def static_binary() -> bytes:
    """A static binary resource (a PNG)."""
    return base64.b64decode(PNG_1X1)


@server.resource("test://template/{id}/data")
def template_data(id: str) -> str:
    """A template: the id comes back in JSON."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource")
def watched() -> str:
    """A resource to subscribe to."""
    return "Watched resource content"


def said(*content: TextContent | ImageContent | EmbeddedResource) -> list[UserMessage]:
    return [UserMessage(role="user", content=item) for item in content]


@server.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """No arguments."""
    return said(TextContent(type="text", text="This is a simple prompt for testing."))


@server.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """Two required arguments, echoed."""
    return said(TextContent(type="text", text=f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """An embedded resource at the given URI."""
    return said(
        text_resource(resourceUri, "Embedded resource content for testing."),
        TextContent(type="text", text="Please process the embedded resource above."),
    )


@server.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """An image."""
    return said(
        ImageContent(type="image", data=PNG_1X1, mime_type="image/png"),
        TextContent(type="text", text="Please analyze the image above."),
    )


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
    """prompts/get answered input required (2026-07-28): one elicitation round."""
    if "user_context" in answers(ctx):
        text = field(answers(ctx)["user_context"], "context") or "?"
        return said(TextContent(type="text", text=f"Use the following context: {text}"))
    return InputRequiredResult(
        input_requests={"user_context": ask("What context should the prompt use?", context="string")}
    )


@server.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion:
    """Completion is declared; no suggestions."""
    return Completion(values=[], total=0, has_more=False)


async def set_level(ctx: ServerRequestContext, params: SetLevelRequestParams) -> EmptyResult:
    return EmptyResult()


async def subscribe(ctx: ServerRequestContext, params: SubscribeRequestParams) -> EmptyResult:
    subscribed.add(str(params.uri))
    return EmptyResult()


async def unsubscribe(ctx: ServerRequestContext, params: UnsubscribeRequestParams) -> EmptyResult:
    subscribed.discard(str(params.uri))
    return EmptyResult()


# MCPServer has no decorator for these three: they go to its low-level server.
_lowlevel = server._lowlevel_server
_lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
_lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
_lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT/mcp"
    )
    args = parser.parse_args()
    if args.http is None:
        server.run()
    else:  # 100 ms: the SSE retry hint the polling scenario waits out
        server.run("streamable-http", port=args.http, event_store=SseEvents(), retry_interval=100)


if __name__ == "__main__":
    main()
