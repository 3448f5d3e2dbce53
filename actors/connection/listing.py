"""Reading a server's whole tool list: every page of ``tools/list``, bounded.

A server that refuses ``tools/list``, repeats a cursor or pages on without end fails
its connection (``ConnectionFailed``), never the actor. Whether to read the list again
(``list_changed`` arrived meanwhile) is the state machine's call, not this module's.

In the 2026-07-28 era a tool whose ``x-mcp-header`` annotations are invalid is left
out with a problem naming it, as the revision requires of clients (SEP-2243,
``actors/protocol/param_headers.py``); one bad tool never hides the others.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from actors.connection.freshness import list_ttl_ms
from actors.protocol.era import Era
from actors.protocol.messages import Tool
from actors.protocol.pages import parse_tools_page
from actors.protocol.param_headers import annotation_problem
from actors.protocol.session import ErrorReceived, ResponseReceived

MAX_TOOLS_PAGES = 1000

Request = Callable[[str, dict[str, Any] | None], Awaitable[ResponseReceived | ErrorReceived]]
"""Send one request on the connection and wait for its answer."""


class ConnectionFailed(Exception):
    """The server misbehaved in a way that ends this connection (not the actor)."""


async def read_tools(
    request: Request, server: str, era: Era | None = None, ttls: list[int] | None = None
) -> tuple[list[Tool], list[str]]:
    """Every tool of every page, and the problems of the tools that were dropped;
    ``ttls`` gets each page's ``ttlMs`` (``freshness.py``)."""
    tools: list[Tool] = []
    problems: list[str] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_TOOLS_PAGES):
        event = await request("tools/list", {"cursor": cursor} if cursor else None)
        if isinstance(event, ErrorReceived):
            raise ConnectionFailed(f"mcp server {server} refused tools/list: {event.error.message}")
        page = parse_tools_page(event.result)
        if ttls is not None and (ttl := list_ttl_ms(event.result)) is not None:
            ttls.append(ttl)
        problems.extend(page.problems)
        for tool in page.tools:
            bad = annotation_problem(tool.input_schema) if era is Era.PER_REQUEST else None
            if bad is None:
                tools.append(tool)
            else:
                problems.append(f"tool {tool.name!r} left out: {bad}")
        cursor = page.next_cursor
        if cursor is None:
            return tools, problems
        if cursor in seen:
            raise ConnectionFailed(f"mcp server {server} repeated tools/list cursor {cursor!r}")
        seen.add(cursor)
    raise ConnectionFailed(f"mcp server {server}: tools/list has over {MAX_TOOLS_PAGES} pages")
