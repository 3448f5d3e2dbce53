"""Reading a server's whole listing: tools, and every kind its capabilities declare.

Each kind is read page by page (``pages.py``), bounded: a server that repeats a
cursor or pages on without end fails its connection (``ConnectionFailed``), never the
actor. Tools are the one kind every server serves: a server that refuses
``tools/list`` fails its connection. A refused optional kind (``resources/list``,
``resources/templates/list``, ``prompts/list``) is recorded as a problem and that
kind is empty; the connection serves its tools. Whether to read again (a change
notification arrived meanwhile) is the state machine's call, not this module's; which
kinds to read again is the caller's (``Kind``).

In the 2026-07-28 era a tool whose ``x-mcp-header`` annotations are invalid is left
out with a problem naming it, as the revision requires of clients (SEP-2243,
``actors/protocol/param_headers.py``); one bad tool never hides the others.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import attrs

from actors.connection.freshness import list_ttl_ms
from actors.protocol.era import Era
from actors.protocol.messages import Prompt, Resource, ResourceTemplate, ServerFeatures, Tool
from actors.protocol.notifications import (
    ListChanged,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)
from actors.protocol.pages import (
    Page,
    parse_page,
    parse_prompts_page,
    parse_resources_page,
    parse_templates_page,
)
from actors.protocol.param_headers import annotation_problem
from actors.protocol.payloads import structure_tool
from actors.protocol.session import ErrorReceived, ResponseReceived

MAX_PAGES = 1000

Request = Callable[[str, dict[str, Any] | None], Awaitable[ResponseReceived | ErrorReceived]]
"""Send one request on the connection and wait for its answer."""

T = TypeVar("T")


class ConnectionFailed(Exception):
    """The server misbehaved in a way that ends this connection (not the actor)."""


class Kind(enum.Enum):
    """A kind of listing; its change notification names which to read again."""

    TOOLS = "tools"
    RESOURCES = "resources"  # resources and templates: one capability, one notification
    PROMPTS = "prompts"


ALL_KINDS = frozenset(Kind)


@attrs.frozen(slots=True)
class Listing:
    """Everything listed, with the problems of what was dropped or refused."""

    tools: tuple[Tool, ...] = ()
    resources: tuple[Resource, ...] = ()
    templates: tuple[ResourceTemplate, ...] = ()
    prompts: tuple[Prompt, ...] = ()
    problems: tuple[str, ...] = ()


class Refused(Exception):
    """The server answered a list request with an error."""


async def _read_pages(
    request: Request,
    server: str,
    method: str,
    parse: Callable[[Mapping[str, Any]], Page[T]],
    ttls: list[int] | None,
) -> tuple[list[T], list[str]]:
    items: list[T] = []
    problems: list[str] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        event = await request(method, {"cursor": cursor} if cursor else None)
        if isinstance(event, ErrorReceived):
            raise Refused(f"mcp server {server} refused {method}: {event.error.message}")
        page = parse(event.result)
        if ttls is not None and (ttl := list_ttl_ms(event.result)) is not None:
            ttls.append(ttl)
        problems.extend(page.problems)
        items.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return items, problems
        if cursor in seen:
            raise ConnectionFailed(f"mcp server {server} repeated {method} cursor {cursor!r}")
        seen.add(cursor)
    raise ConnectionFailed(f"mcp server {server}: {method} has over {MAX_PAGES} pages")


async def read_tools(
    request: Request, server: str, era: Era | None = None, ttls: list[int] | None = None
) -> tuple[list[Tool], list[str]]:
    """Every tool of every page, and the problems of the tools that were dropped;
    ``ttls`` gets each page's ``ttlMs`` (``freshness.py``)."""
    try:
        found, problems = await _read_pages(
            request,
            server,
            "tools/list",
            lambda r: parse_page(r, "tools/list", "tools", structure_tool),
            ttls,
        )
    except Refused as exc:
        raise ConnectionFailed(str(exc)) from None
    tools: list[Tool] = []
    for tool in found:
        bad = annotation_problem(tool.input_schema) if era is Era.PER_REQUEST else None
        if bad is None:
            tools.append(tool)
        else:
            problems.append(f"tool {tool.name!r} left out: {bad}")
    return tools, problems


async def _optional(
    request: Request, server: str, method: str, parse: Callable[[Mapping[str, Any]], Page[T]]
) -> tuple[tuple[T, ...], list[str]]:
    """A kind the server declared: refused, it is empty with the refusal as a problem."""
    try:
        items, problems = await _read_pages(request, server, method, parse, None)
    except Refused as exc:
        return (), [str(exc)]
    return tuple(items), problems


async def read_listing(
    request: Request,
    server: str,
    features: ServerFeatures,
    *,
    kinds: frozenset[Kind] = ALL_KINDS,
    previous: Listing | None = None,
    era: Era | None = None,
    ttls: list[int] | None = None,
) -> Listing:
    """Read ``kinds`` (those ``features`` declares; tools always), keep the others from
    ``previous``. Problems are this reading's only."""
    last = previous or Listing()
    problems: list[str] = []
    tools, resources, templates, prompts = last.tools, last.resources, last.templates, last.prompts
    if Kind.TOOLS in kinds:
        found, dropped = await read_tools(request, server, era, ttls)
        tools = tuple(found)
        problems += dropped
    if Kind.RESOURCES in kinds:
        resources, templates = (), ()
        if features.resources:
            resources, dropped = await _optional(request, server, "resources/list", parse_resources_page)
            problems += dropped
        if features.templates:
            method = "resources/templates/list"
            templates, dropped = await _optional(request, server, method, parse_templates_page)
            problems += dropped
    if Kind.PROMPTS in kinds:
        prompts = ()
        if features.prompts:
            prompts, dropped = await _optional(request, server, "prompts/list", parse_prompts_page)
            problems += dropped
    return Listing(tools, resources, templates, prompts, tuple(problems))


CHANGED_KIND: dict[type[ListChanged], Kind] = {
    ToolsListChanged: Kind.TOOLS,
    ResourcesListChanged: Kind.RESOURCES,
    PromptsListChanged: Kind.PROMPTS,
}
"""The kind of list each ``*/list_changed`` notification says changed."""
