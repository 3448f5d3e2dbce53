"""One page of a server's listings (``tools/list``, ``resources/list``,
``resources/templates/list``, ``prompts/list``), read without I/O.

Every kind follows one rule: a malformed entry is dropped and reported as a problem,
so one bad item never hides the server's others; a malformed page (no array, a cursor
that is not a string) is a ProtocolError. Resources, templates and prompts keep the
item as the server sent it (``raw``), handed on unchanged; only the fields we address
them by are checked here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import attrs

from actors.protocol.errors import ProtocolError
from actors.protocol.messages import Prompt, Resource, ResourceTemplate, Tool
from actors.protocol.payloads import structure_tool

T = TypeVar("T")


@attrs.frozen(slots=True)
class Page(Generic[T]):
    """One page of a listing: its items, the next cursor, and entries we dropped."""

    items: tuple[T, ...]
    next_cursor: str | None
    problems: tuple[str, ...] = ()


@attrs.frozen(slots=True)
class ToolsPage:
    """One page of ``tools/list``: the tools, the next cursor, and entries we dropped."""

    tools: tuple[Tool, ...]
    next_cursor: str | None
    problems: tuple[str, ...] = ()


def _named(kind: str, key: str, obj: Any) -> tuple[Mapping[str, Any], str, str]:
    """The entry, its address (``key``) and its name, or ProtocolError."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"{kind} entry must be an object, got {type(obj).__name__}")
    address = obj.get(key)
    if not isinstance(address, str) or not address:
        raise ProtocolError(f"{kind} entry has no {key}")
    name = obj.get("name", address if key != "name" else "")
    if not isinstance(name, str):
        raise ProtocolError(f"{kind} {address!r}: name must be a string")
    return obj, address, name


def structure_resource(obj: Any) -> Resource:
    """A Resource from one ``resources/list`` entry, or ProtocolError."""
    raw, uri, name = _named("resource", "uri", obj)
    return Resource(uri, name, raw)


def structure_template(obj: Any) -> ResourceTemplate:
    """A ResourceTemplate from one ``resources/templates/list`` entry, or ProtocolError."""
    raw, template, name = _named("resource template", "uriTemplate", obj)
    return ResourceTemplate(template, name, raw)


def structure_prompt(obj: Any) -> Prompt:
    """A Prompt from one ``prompts/list`` entry, or ProtocolError."""
    raw, name, _ = _named("prompt", "name", obj)
    arguments = raw.get("arguments") or []
    if not isinstance(arguments, list):
        raise ProtocolError(f"prompt {name!r}: arguments must be an array")
    names: list[str] = []
    required: list[str] = []
    for argument in arguments:
        if not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
            raise ProtocolError(f"prompt {name!r}: every argument needs a name")
        names.append(argument["name"])
        if argument.get("required") is True:
            required.append(argument["name"])
    return Prompt(name, tuple(names), tuple(required), raw)


def parse_page(result: Mapping[str, Any], method: str, key: str, structure: Callable[[Any], T]) -> Page[T]:
    """Read one page of ``method`` whose items are under ``key``."""
    raw = result.get(key)
    if not isinstance(raw, list):
        raise ProtocolError(f"{method} result has no {key} array")
    cursor = result.get("nextCursor")
    if cursor is not None and not isinstance(cursor, str):
        raise ProtocolError(f"{method} nextCursor must be a string")
    items: list[T] = []
    problems: list[str] = []
    for entry in raw:
        try:
            items.append(structure(entry))
        except ProtocolError as exc:
            problems.append(str(exc))
    return Page(tuple(items), cursor or None, tuple(problems))


def parse_tools_page(result: Mapping[str, Any]) -> ToolsPage:
    """Read one ``tools/list`` page. A malformed entry is dropped and reported, so one
    bad tool never hides the server's other tools; a malformed page is a ProtocolError."""
    page = parse_page(result, "tools/list", "tools", structure_tool)
    return ToolsPage(page.items, page.next_cursor, page.problems)


def parse_resources_page(result: Mapping[str, Any]) -> Page[Resource]:
    """Read one ``resources/list`` page."""
    return parse_page(result, "resources/list", "resources", structure_resource)


def parse_templates_page(result: Mapping[str, Any]) -> Page[ResourceTemplate]:
    """Read one ``resources/templates/list`` page."""
    return parse_page(result, "resources/templates/list", "resourceTemplates", structure_template)


def parse_prompts_page(result: Mapping[str, Any]) -> Page[Prompt]:
    """Read one ``prompts/list`` page."""
    return parse_page(result, "prompts/list", "prompts", structure_prompt)
