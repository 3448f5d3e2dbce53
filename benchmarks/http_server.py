"""The official ``mcp`` SDK's Streamable HTTP server with one ``echo`` tool, for
``bench_http.py``: ``python benchmarks/http_server.py PORT`` serves
``http://127.0.0.1:PORT/mcp`` (uvicorn, as the SDK's own ``run`` does, SSE answers)."""

from __future__ import annotations

import logging
import sys

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer
except ImportError:  # pragma: no cover - mcp 1.x
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("bench-http")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


if __name__ == "__main__":
    logging.disable(logging.WARNING)
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
