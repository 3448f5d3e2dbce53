"""The conformance fixture's shared parts: the one ``MCPServer`` every
``everything_*`` module registers on, and the payloads several of them answer.
tests/servers/everything_server.py is the entry point and says what the fixture is for.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer, RequestStateSecurity
from mcp.types import EmbeddedResource, TextResourceContents

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


def text_resource(uri: str, text: str, mime: str = "text/plain") -> EmbeddedResource:
    return EmbeddedResource(
        type="resource", resource=TextResourceContents(uri=uri, mime_type=mime, text=text)
    )
