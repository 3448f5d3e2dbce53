"""A server's catalog entries from its listed tools: repeated names dropped, and an
entry kept as it was when its tool came back unchanged, so a relist costs only what
changed (classification, fingerprint and schema lookup are an entry's dear part)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actors.protocol.messages import Tool
from actors.router.catalog import ServerView, ToolEntry, make_entry


def unique_tools(server: str, tools: Sequence[Tool]) -> tuple[tuple[Tool, ...], tuple[str, ...]]:
    """Drop repeated tool names (first wins), saying so."""
    seen: dict[str, Tool] = {}
    problems = []
    for tool in tools:
        if tool.name in seen:
            problems.append(f"tool {tool.name!r} is listed twice by {server}; the first one is kept")
        else:
            seen[tool.name] = tool
    return tuple(seen.values()), tuple(problems)


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON, types included: Python's ``==`` takes 1, 1.0 and true for one
    value, but they are different schemas (and different fingerprints, so pins)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def entries_for(
    previous: ServerView, tools: Sequence[Tool], ids: Mapping[str, str], max_description: int
) -> tuple[ToolEntry, ...]:
    """The server's entries for ``tools``; a tool listed again unchanged (same id, same
    definition) keeps its entry, so a relist costs only what changed (classification,
    fingerprint and schema lookup are the expensive part of an entry). Nothing changed:
    ``previous.entries`` itself."""
    before = {entry.name: entry for entry in previous.entries}
    entries = []
    for tool in tools:
        old = before.get(tool.name)
        if old is not None and _unchanged(old, tool, ids[tool.name]):
            entries.append(old)
        else:
            entries.append(make_entry(ids[tool.name], previous.spec, tool, max_description))
    if len(entries) == len(previous.entries) and all(
        new is old for new, old in zip(entries, previous.entries, strict=True)
    ):
        return previous.entries
    return tuple(entries)


def _unchanged(entry: ToolEntry, tool: Tool, tool_id: str) -> bool:
    try:
        return (
            entry.id == tool_id
            and entry.description == tool.description
            and entry.title == tool.title
            and same_json(entry.annotations, tool.annotations)
            and same_json(entry.input_schema, tool.input_schema)
            and same_json(entry.output_schema, tool.output_schema)
        )
    except RecursionError:  # nested beyond reason: treat as new
        return False
