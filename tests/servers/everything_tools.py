"""The conformance fixture's plain tools: content of every type, an error, logging,
progress, a reconnection, schemas and ``x-mcp-header``.
The names, texts and payloads are the suite's contract (see everything_server.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
from everything_app import ERROR_TEXT, PNG_1X1, SIMPLE_TEXT, STEP, WAV_EMPTY, server, text_resource
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    TextContent,
)
from pydantic import Field

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))  # run as a script
from schema_fixtures import SUITE_FOCAL


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
async def test_logging_tool(ctx: Context) -> str:
    """Logs three info messages, then answers. The SDK sends them only where the client
    asked for log messages: a 2026-07-28 request without ``_meta`` logLevel gets none."""
    for text in ("Logging tool started", "Logging tool working", "Logging tool finished"):
        await ctx.info(text)
    return "Logging tool completed"


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


# ------------------------------------------------------------------ schemas, headers

# The suite's own focal schema (tests/support/schema_fixtures.py, shared with the schema tests).
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
