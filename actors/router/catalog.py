"""Catalog epochs: immutable views of every server and tool at one moment.

The router builds a new ``Catalog`` for every change it hears of (a tool list, a
state change) and never mutates an old one, so a turn that holds a catalog sees
exactly the tools, schemas and states of the moment it started, whatever happens
next. Building reuses the unchanged servers' views; only the flat id index and the
listing are rebuilt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import trio

from actors.connection.messages import ConnectionMessage
from actors.connection.spec import ServerSpec
from actors.connection.states import State
from actors.router.naming import assign_ids


@attrs.frozen(slots=True)
class ToolEntry:
    """One namespaced tool as the host and the model see it."""

    id: str
    server: str
    name: str
    description: str
    input_schema: Mapping[str, Any]
    title: str | None = None
    annotations: Mapping[str, Any] | None = None


@attrs.frozen(slots=True)
class ServerView:
    """One server at one epoch: its state and its last known tools."""

    name: str
    spec: ServerSpec
    mailbox: trio.MemorySendChannel[ConnectionMessage] = attrs.field(eq=False, repr=False)
    state: State = State.IDLE
    since: float = 0.0
    attempt: int = 0
    last_error: str | None = None
    next_retry_at: float | None = None
    available: bool = False
    generation: int = 0
    tool_names: tuple[str, ...] = ()
    raw_tools: tuple[Any, ...] = attrs.field(default=(), repr=False)
    problems: tuple[str, ...] = ()
    owner: str | None = None


@attrs.frozen(slots=True)
class Catalog:
    """Every server and tool at one epoch (shared servers, plus per-session overlays)."""

    epoch: int = 0
    servers: Mapping[str, ServerView] = attrs.field(factory=dict)
    tools: Mapping[str, ToolEntry] = attrs.field(factory=dict)
    listing: tuple[ToolEntry, ...] = ()
    overlays: Mapping[str, Mapping[str, ServerView]] = attrs.field(factory=dict)

    def view_for(self, owner: str | None) -> Catalog:
        """This epoch as one session sees it: shared servers plus its private ones."""
        overlay = self.overlays.get(owner) if owner is not None else None
        if not overlay:
            return self
        servers = {**self.servers, **overlay}
        tools, listing = index_tools(servers)
        return Catalog(self.epoch, servers, tools, listing, {})


def index_tools(servers: Mapping[str, ServerView]) -> tuple[dict[str, ToolEntry], tuple[ToolEntry, ...]]:
    """The id → entry index and the listing (in config order) for a set of servers."""
    pairs = [(view.name, tool.name) for view in servers.values() for tool in view.raw_tools]
    ids = assign_ids(pairs)
    tools: dict[str, ToolEntry] = {}
    for view in servers.values():
        for tool in view.raw_tools:
            entry = ToolEntry(
                ids[(view.name, tool.name)],
                view.name,
                tool.name,
                tool.description,
                tool.input_schema,
                tool.title,
                tool.annotations,
            )
            tools[entry.id] = entry
    return tools, tuple(tools.values())
