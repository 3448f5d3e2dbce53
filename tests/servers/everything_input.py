"""The conformance fixture's tools that ask the client for input under keys of their
own (SEP-2322's ``inputRequests``), in either era.

In the 2026-07-28 era a tool answers input required (``inputRequests`` under the keys
the suite names, and a request state the SDK seals) and is called again with the
answers; in the handshake era the same tool sends the same requests mid-call
(``answered``), all at once, and goes on with their answers. So a gateway's client of
either era may reach it through a backend connection of either era. (The SDK's
``Resolve`` markers ask in both eras too, but under keys of the SDK's making, and the
suite names these keys.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio
from everything_app import server
from everything_asks import Answer, outcome
from everything_resources import said
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    SamplingMessage,
    TextContent,
)

PER_REQUEST_ERA = "2026-07-28"
RESULT_OF: dict[str, Any] = {
    "elicitation/create": ElicitResult,
    "sampling/createMessage": CreateMessageResult,
    "roots/list": ListRootsResult,
}


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


def handshake(ctx: Context) -> bool:
    return ctx.protocol_version != PER_REQUEST_ERA


async def answered(ctx: Context, requests: Mapping[str, InputRequest]) -> Mapping[str, Any]:
    """The client's answers by key: in the 2026-07-28 era what the call brought
    (``inputResponses``; none at first, and the tool answers input required), in the
    handshake era ``requests`` asked now, all at once, mid-call."""
    if not handshake(ctx):
        return ctx.input_responses or {}
    got: dict[str, Any] = {}
    related = ServerMessageMetadata(related_request_id=ctx.request_id)

    async def one(key: str, request: InputRequest) -> None:
        got[key] = await ctx.session.send_request(request, RESULT_OF[request.method], metadata=related)

    async with anyio.create_task_group() as group:
        for key, request in requests.items():
            group.start_soon(one, key, request)
    return got


async def elicited(ctx: Context, message: str) -> str:
    """``action=…, content=…`` of one elicitation sent mid-call (handshake era only)."""
    return outcome(await ctx.elicit(message=message, schema=Answer))


NAME = {"user_name": ask("What is your name?", name="string")}
CAPITAL = {"capital_question": sample("What is the capital of France?", 100)}
ROOTS = {"client_roots": ListRootsRequest()}
CONFIRM = {"confirm": ask("Please confirm", ok="boolean")}


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    """One elicitation round, then a greeting."""
    got = await answered(ctx, NAME)
    if "user_name" in got:
        return f"Hello, {field(got['user_name'], 'name') or 'stranger'}!"
    return InputRequiredResult(input_requests=NAME)


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
    """One sampling round, then what the model said."""
    answer = (await answered(ctx, CAPITAL)).get("capital_question")
    if answer is not None:
        text = (
            answer.content.text
            if isinstance(answer, CreateMessageResult) and answer.content.type == "text"
            else "?"
        )
        return f"Model said: {text}"
    return InputRequiredResult(input_requests=CAPITAL)


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
    """One roots/list round, then how many roots."""
    answer = (await answered(ctx, ROOTS)).get("client_roots")
    if answer is not None:
        return f"Client exposed {len(answer.roots) if isinstance(answer, ListRootsResult) else 0} root(s)."
    return InputRequiredResult(input_requests=ROOTS)


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
    """Its request state must come back unchanged with the answer (2026-07-28)."""
    got = await answered(ctx, CONFIRM)
    if "confirm" in got and (handshake(ctx) or ctx.request_state == "request-state-nonce"):
        return "state-ok: confirmation received"
    return InputRequiredResult(input_requests=CONFIRM, request_state="request-state-nonce")


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
    """Elicitation, sampling and roots in one round."""
    wanted = {
        "user_name": ask("What is your name?", name="string"),
        "greeting": sample("Generate a greeting", 50),
        "client_roots": ListRootsRequest(),
    }
    if wanted.keys() <= (await answered(ctx, wanted)).keys():
        return "All inputs received."
    return InputRequiredResult(input_requests=wanted, request_state="multiple-inputs")


STEP_1 = {"step1": ask("Step 1: What is your name?", name="string")}
STEP_2 = {"step2": ask("Step 2: What is your favorite color?", color="string")}


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
    """Three rounds, the request state saying which; anything unexpected starts over
    (in the handshake era: two elicitations, one after the other)."""
    if handshake(ctx):
        name = field((await answered(ctx, STEP_1))["step1"], "name")
        return f"{name} likes {field((await answered(ctx, STEP_2))['step2'], 'color')}."
    state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
    got = await answered(ctx, {})
    if state["round"] == 1 and "step1" in got:
        return InputRequiredResult(
            input_requests=STEP_2,
            request_state=json.dumps({"round": 2, "name": field(got["step1"], "name")}),
        )
    if state["round"] == 2 and "step2" in got:
        return f"{state.get('name')} likes {field(got['step2'], 'color')}."
    return InputRequiredResult(input_requests=STEP_1, request_state=json.dumps({"round": 1}))


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
    """The SDK refuses a request state that is not the one it sealed."""
    if handshake(ctx):
        await answered(ctx, CONFIRM)
        return "state-ok: confirmed mid-call"
    if ctx.request_state is None:
        return InputRequiredResult(input_requests=CONFIRM, request_state="round-1")
    return f"state-ok: {ctx.request_state}"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str | InputRequiredResult:
    """Asks only for what the client declared it can answer (in the handshake era one
    request at a time, sampling first)."""
    caps = ctx.client_capabilities
    wanted: dict[str, InputRequest] = {}
    if caps is None or caps.sampling is not None:
        wanted["sample"] = sample("Say hello", 50)
    if caps is None or caps.elicitation is not None:
        wanted["ask"] = ask("What is your name?", name="string")
    if not handshake(ctx):
        return InputRequiredResult(input_requests=wanted, request_state="capability-gated")
    for key, request in wanted.items():
        await answered(ctx, {key: request})
    return f"Answered: {', '.join(wanted) or 'nothing'}."


HELLO = {"hello": sample("Say hello", 10)}


@server.tool()
async def test_missing_capability(ctx: Context) -> str | InputRequiredResult:
    """Needs the client's model: a JSON-RPC error naming the sampling capability when
    the client did not declare it, else it samples. (A gateway's backend connection of
    the handshake era declares what any client may do; the gateway refuses the request
    when its own client did not declare it.)"""
    capabilities = ctx.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="test_missing_capability needs the client's sampling capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    answer = (await answered(ctx, HELLO)).get("hello")
    if answer is None:
        return InputRequiredResult(input_requests=HELLO)
    text = (
        answer.content.text
        if isinstance(answer, CreateMessageResult) and answer.content.type == "text"
        else "?"
    )
    return f"The client declared sampling; its model said: {text}"


CONTEXT = {"user_context": ask("What context should the prompt use?", context="string")}


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
    """prompts/get answered input required (2026-07-28): one elicitation round."""
    got = await answered(ctx, CONTEXT)
    if "user_context" in got:
        text = field(got["user_context"], "context") or "?"
        return said(TextContent(type="text", text=f"Use the following context: {text}"))
    return InputRequiredResult(input_requests=CONTEXT)


@server.tool()
async def test_streaming_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Asks the user for a name mid-call, the way its era allows: in the 2026-07-28 era
    an input-required result on the call's own response (never a request of its own on
    the stream), in the handshake era an ``elicitation/create`` related to the call.
    Progress 0 of 1 first (when the client gave a token)."""
    await ctx.report_progress(progress=0, total=1, message="Asking for a name")
    if handshake(ctx):
        return f"User response: {await elicited(ctx, 'What is your name?')}"
    got = await answered(ctx, {})
    if "user_name" in got:
        return f"Hello, {field(got['user_name'], 'name') or 'stranger'}!"
    return InputRequiredResult(input_requests=NAME)
