"""A small MCP server built on the official ``mcp`` Python SDK, for interop tests.

Runs over stdio. Tools: ``add`` (structured int result), ``shout``, and ``count``,
which reports progress through the SDK's own progress API.
"""

from __future__ import annotations

import anyio

try:  # mcp 2.x
    from mcp.server.mcpserver import Context, MCPServer
except ImportError:  # pragma: no cover - mcp 1.x
    from mcp.server.fastmcp import Context  # type: ignore[no-redef]
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("sdk-test-server")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Return the text in upper case."""
    return text.upper()


@server.tool()
async def count(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Count to ``steps``, reporting progress at each step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
        await anyio.sleep(0.01)
    return f"counted to {steps}"


if __name__ == "__main__":
    server.run("stdio")
