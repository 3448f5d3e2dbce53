"""A small MCP server built on the official ``mcp`` Python SDK, for interop tests.

Runs over stdio by default. Tools: ``add`` (structured int result), ``shout``,
``count``, which reports progress through the SDK's own progress API, ``sleep``,
which reports progress 0 at once (so a test knows the call reached the server) and
then sleeps, ``ask``, which asks its client the question (elicitation) and says
what came back, and ``sample``, which asks its client's model (sampling) and says
what it wrote.

``--http PORT`` serves Streamable HTTP at ``http://127.0.0.1:PORT/mcp`` instead, with
the SDK's own stack (uvicorn, SSE answers): a real remote server process that a test
can SIGKILL. ``--resumable`` adds an in-memory event store, so every answer stream
starts with a priming event (an id and a ``retry`` of 1 s) and can be resumed with
``Last-Event-ID``, as the SDK does for servers that support resumability.
``--legacy`` serves the old HTTP+SSE transport at ``http://127.0.0.1:PORT/sse``.
Over Streamable HTTP, SIGTERM ends every ``subscriptions/listen`` stream gracefully
(with its result, as the spec's graceful close) before the server shuts down; the
SDK's own ``run`` would wait for those open streams forever.

``--grow`` adds ``grow``, which publishes the tool ``late`` (it reverses text) and
says the tool list changed (the SDK's ``notify_tools_changed``: on a 2026-07-28
connection, to its ``subscriptions/listen`` streams). ``--only NAMES`` keeps only
the tools named (comma-separated), so a restart can come back with another set.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import warnings
from typing import Any

import anyio
from pydantic import BaseModel

try:  # mcp 2.x
    from mcp.server.mcpserver import Context, MCPServer
except ImportError:  # pragma: no cover - mcp 1.x
    from mcp.server.fastmcp import Context  # type: ignore[no-redef]
    from mcp.server.fastmcp import FastMCP as MCPServer

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.types import SamplingMessage, TextContent

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


@server.tool()
async def sleep(seconds: float, ctx: Context) -> str:  # type: ignore[type-arg]
    """Report progress 0, sleep, then say so."""
    await ctx.report_progress(0, seconds, "sleeping")
    await anyio.sleep(seconds)
    return "slept"


class Answer(BaseModel):
    answer: str


@server.tool()
async def ask(question: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Ask the client ``question`` (elicitation) and say what it answered."""
    result = await ctx.elicit(question, Answer)
    if result.action == "accept":
        return f"answered: {result.data.answer}"
    return f"no answer: {result.action}"


@server.tool()
async def sample(prompt: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Ask the client's model (sampling) to answer ``prompt`` and say what it wrote."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    with warnings.catch_warnings():  # deprecated by the 2026-07-28 era, still the handshake era's
        warnings.simplefilter("ignore")
        result = await ctx.request_context.session.create_message(
            [message], max_tokens=64, related_request_id=ctx.request_id
        )
    content = result.content
    return f"sampled: {content.text if isinstance(content, TextContent) else content}"


def late(text: str) -> str:
    """Return the text reversed (published by ``grow``)."""
    return text[::-1]


async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
    """Publish the tool ``late`` and tell listening clients the tool list changed."""
    server.add_tool(late)
    await ctx.notify_tools_changed()
    return "grown"


def keep_only(names: str) -> None:
    """Remove every tool but ``names`` (comma-separated)."""
    kept = set(names.split(","))
    for tool in server._tool_manager.list_tools():
        if tool.name not in kept:
            server.remove_tool(tool.name)


def serve_streamable_http(port: int, store: EventStore | None) -> None:
    """Serve Streamable HTTP with uvicorn, as ``server.run`` does, but end the listen
    streams gracefully on SIGTERM, so that the server exits at once."""
    import uvicorn

    listen = server._lowlevel_server._request_handlers["subscriptions/listen"].handler

    class Graceful(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            listen.close()
            await super().shutdown(sockets)

    app = server.streamable_http_app(event_store=store, retry_interval=1000)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    anyio.run(Graceful(config).serve)


class MemoryEventStore(EventStore):
    """Every event of every stream, kept in memory (a test server lives briefly)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._events: list[tuple[str, str, object]] = []  # (event id, stream id, message)

    async def store_event(self, stream_id: str, message: object) -> str:
        event_id = str(next(self._ids))
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        found = [i for i, (event_id, _, _) in enumerate(self._events) if event_id == last_event_id]
        if not found:
            return None
        stream_id = self._events[found[0]][1]
        for event_id, stream, message in self._events[found[0] + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))  # type: ignore[arg-type]
        return stream_id


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on this port")
    parser.add_argument("--resumable", action="store_true", help="answer streams carry event ids")
    parser.add_argument("--legacy", action="store_true", help="serve the HTTP+SSE transport at /sse")
    parser.add_argument("--grow", action="store_true", help="add grow, which publishes the tool late")
    parser.add_argument("--only", metavar="NAMES", help="keep only these tools (comma-separated)")
    args = parser.parse_args()
    if args.grow:
        server.tool()(grow)
    if args.only is not None:
        keep_only(args.only)
    if args.http is None:
        server.run("stdio")
    else:
        logging.disable(logging.WARNING)
        if args.legacy:
            server.run("sse", host="127.0.0.1", port=args.http)
        else:
            serve_streamable_http(args.http, MemoryEventStore() if args.resumable else None)
