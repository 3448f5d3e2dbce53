"""The conformance fixture (tests/servers/everything_server.py) really does what the
server scenarios check, with the official SDK client over stdio. Some 0.1.16 scenarios
(``tools-call-simple-text``, ``tools-call-error``) pass even when the tool is missing,
so here each call must go through and answer what the scenario looks for."""

from __future__ import annotations

import base64
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp.types as types
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support.paths import SERVERS

FIXTURE = str(SERVERS / "everything_server.py")


@asynccontextmanager
async def fixture(**callbacks: Any) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=[FIXTURE])
    async with stdio_client(params) as (read, write), ClientSession(read, write, **callbacks) as session:
        await session.initialize()
        yield session


async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="Paris"), model="stub"
    )


def texts(result: types.CallToolResult) -> list[str]:
    return [item.text for item in result.content if isinstance(item, types.TextContent)]


async def test_the_content_tools_answer_what_the_scenarios_check() -> None:
    async with fixture() as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert {
            "test_simple_text",
            "test_error_handling",
            "test_image_content",
            "json_schema_2020_12_tool",
        } <= names
        simple = await session.call_tool("test_simple_text", {})
        assert not simple.is_error and texts(simple) == ["This is a simple text response for testing."]
        failed = await session.call_tool("test_error_handling", {})
        assert failed.is_error and "This tool intentionally returns an error for testing" in texts(failed)[0]
        missing = await session.call_tool("test_no_such_tool", {})
        assert missing.is_error  # what a missing tool looks like: not the answers above
        image = (await session.call_tool("test_image_content", {})).content[0]
        assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
        assert base64.b64decode(image.data).startswith(b"\x89PNG")
        mixed = (await session.call_tool("test_multiple_content_types", {})).content
        assert [item.type for item in mixed] == ["text", "image", "resource"]


async def test_logging_progress_and_the_client_requests_go_through() -> None:
    logged: list[Any] = []
    asked: list[str] = []

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params.data)

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"response": "yes"})

    async with fixture(
        logging_callback=log, sampling_callback=sample, elicitation_callback=elicit
    ) as session:
        await session.call_tool("test_tool_with_logging", {})
        assert logged == ["Tool execution started", "Tool processing data", "Tool execution completed"]
        progress: list[float] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append(done)

        await session.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
        assert progress == [0, 50, 100]
        sampled = await session.call_tool("test_sampling", {"prompt": "Capital of France?"})
        assert texts(sampled) == ["LLM response: Paris"]
        elicited = await session.call_tool("test_elicitation", {"message": "Sure?"})
        assert asked == ["Sure?"] and texts(elicited) == [
            'User response: action=accept, content={"response":"yes"}'
        ]


async def test_resources_subscriptions_prompts_logging_and_ping() -> None:
    async with fixture() as session:
        text = (await session.read_resource("test://static-text")).contents[0]
        assert isinstance(text, types.TextResourceContents)
        assert text.text == "This is the content of the static text resource."
        data = (await session.read_resource("test://template/42/data")).contents[0]
        assert isinstance(data, types.TextResourceContents) and '"id": "42"' in data.text
        await session.subscribe_resource("test://watched-resource")
        await session.unsubscribe_resource("test://watched-resource")
        prompt = await session.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        first = prompt.messages[0].content
        assert (
            isinstance(first, types.TextContent) and first.text == "Prompt with arguments: arg1='a', arg2='b'"
        )
        await session.set_logging_level("info")
        await session.send_ping()


# Each tool that asks the client asks in either era: the handshake era's requests
# mid-call, the 2026-07-28 era's input-required results (which the SDK client answers
# and retries), so a gateway's backend connection of either era reaches it.
ASKING = [
    ("test_sampling", {"prompt": "Capital of France?"}, "LLM response: Paris"),
    ("test_elicitation", {"message": "Sure?"}, 'User response: action=accept, content={"response":"yes"}'),
    ("test_input_required_result_sampling", {}, "Model said: Paris"),
    ("test_input_required_result_elicitation", {}, "Hello, Ada!"),
    ("test_input_required_result_list_roots", {}, "Client exposed 1 root(s)."),
    ("test_input_required_result_multiple_inputs", {}, "All inputs received."),
    ("test_input_required_result_multi_round", {}, "Ada likes blue."),
    ("test_input_required_result_request_state", {}, "state-ok: confirmation received"),
    ("test_missing_capability", {}, "The client declared sampling; its model said: Paris"),
]


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_the_asking_tools_ask_in_either_era(era: str) -> None:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        fields = (
            params.requested_schema["properties"] if isinstance(params, types.ElicitRequestFormParams) else {}
        )
        answer = {"response": "yes", "name": "Ada", "color": "blue", "ok": True}
        return types.ElicitResult(action="accept", content={k: v for k, v in answer.items() if k in fields})

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///tmp")])

    client = Client(
        StdioServerParameters(command=sys.executable, args=[FIXTURE]),
        mode=era,  # type: ignore[arg-type]
        sampling_callback=sample,
        elicitation_callback=elicit,
        list_roots_callback=roots,
    )
    async with client:
        for tool, arguments, expected in ASKING:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error and texts(result) == [expected], (tool, result)
