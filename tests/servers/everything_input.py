"""The conformance fixture's input-required results (the 2026-07-28 era): a tool or
prompt answers what it needs from the client, and is called again with the answers and
its request state (which the SDK seals).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from everything_app import server
from everything_asks import Answer, elicited
from everything_resources import said
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.types import (
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


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
    """prompts/get answered input required (2026-07-28): one elicitation round."""
    if "user_context" in answers(ctx):
        text = field(answers(ctx)["user_context"], "context") or "?"
        return said(TextContent(type="text", text=f"Use the following context: {text}"))
    return InputRequiredResult(
        input_requests={"user_context": ask("What context should the prompt use?", context="string")}
    )


@server.tool()
async def test_streaming_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Asks the user for a name mid-call, the way its era allows: in the 2026-07-28 era
    an input-required result on the call's own response (never a request of its own on
    the stream), in the handshake era an ``elicitation/create`` related to the call.
    Progress 0 of 1 first (when the client gave a token)."""
    await ctx.report_progress(progress=0, total=1, message="Asking for a name")
    if ctx.protocol_version != PER_REQUEST_ERA:
        return f"User response: {await elicited(ctx, 'What is your name?', Answer)}"
    if "user_name" in answers(ctx):
        return f"Hello, {field(answers(ctx)['user_name'], 'name') or 'stranger'}!"
    return InputRequiredResult(input_requests={"user_name": ask("What is your name?", name="string")})
