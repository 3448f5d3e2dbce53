"""What the store remembers of each shared server across starts: its last listing
(``read_cached_listings``: its tools searchable, and its resources, templates and
prompts listed, all marked stale, before the server lists its own; ``listing_to_save``
writes it) and the protocol era it speaks (``EraMemory``).

A connection actor keeps the era it found (``actors/protocol/era.py`` has the rules: a
remembered era is tried first, and a remembered handshake era that fails is
forgotten). It cannot reach the store itself (``actors/`` never imports
``supervisor/``), so the era travels both ways through here: read once at start and
handed to each new actor of a server (``known``), and written back when an actor's
memory changes, as its state changes tell the router (``saw``, the router's era sink).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

from actors.connection.messages import ServerListed
from actors.log_events import get_logger
from actors.protocol.era import Era
from actors.protocol.errors import ProtocolError
from actors.protocol.messages import ServerFeatures
from actors.protocol.pages import structure_prompt, structure_resource, structure_template
from actors.protocol.payloads import structure_tool, tool_to_wire
from supervisor.store import SaveEra, SaveToolList, Store, StoreMessage

T = TypeVar("T")

log = get_logger("supervisor.server_memory")


def read_cached_listings(store: Store, servers: Iterable[str]) -> dict[str, ServerListed]:
    """Last-known listings of configured servers (unreadable entries skipped; a server
    saved with its tools alone, before the store kept the rest, lists only those)."""
    wanted = set(servers)
    surfaces = store.surfaces()
    cached: dict[str, ServerListed] = {}
    for server, (tools, _listed_at) in store.tool_lists().items():
        if server in wanted:
            cached[server] = _listing(server, tools, surfaces.get(server, {}))
    return cached


def _listing(server: str, tools: list[Any], surface: Mapping[str, Any]) -> ServerListed:
    features = surface.get("features")
    known = attrs.fields_dict(ServerFeatures)
    flags = {k: v is True for k, v in features.items() if k in known} if isinstance(features, Mapping) else {}
    return ServerListed(
        server,
        0,
        _readable(tools, structure_tool),
        resources=_readable(surface.get("resources"), structure_resource),
        templates=_readable(surface.get("templates"), structure_template),
        prompts=_readable(surface.get("prompts"), structure_prompt),
        features=ServerFeatures(**flags),
    )


def _readable(items: Any, structure: Callable[[Any], T]) -> tuple[T, ...]:
    """The items ``structure`` reads (the others skipped)."""
    parsed = []
    for item in items if isinstance(items, list) else ():
        try:
            parsed.append(structure(item))
        except ProtocolError:
            continue
    return tuple(parsed)


def listing_to_save(listed: ServerListed) -> SaveToolList:
    """The store's message for a server's listing: its tools and the rest as sent."""
    surface = {
        "resources": [dict(r.raw) for r in listed.resources],
        "templates": [dict(t.raw) for t in listed.templates],
        "prompts": [dict(p.raw) for p in listed.prompts],
        "features": attrs.asdict(listed.features),
    }
    return SaveToolList(listed.server, [tool_to_wire(t) for t in listed.tools], time.time(), surface)


class EraMemory:
    """The remembered eras of one supervisor, by server name."""

    def __init__(self, eras: Mapping[str, Era], submit: Callable[[StoreMessage], object]) -> None:
        self._eras = dict(eras)
        self._submit = submit

    @classmethod
    def load(cls, store: Store, submit: Callable[[StoreMessage], object]) -> EraMemory:
        """The eras the store holds (a row naming no era we know is skipped: probed)."""
        eras = {}
        for server, value in store.eras().items():
            try:
                eras[server] = Era(value)
            except ValueError:
                log.warning("stored era %r of server %s ignored", value, server)
        return cls(eras, submit)

    def known(self, server: str) -> Era | None:
        """The era to try first with ``server`` (None: probe)."""
        return self._eras.get(server)

    def saw(self, server: str, era: Era | None) -> None:
        """An actor of ``server`` now remembers ``era``: store it when it changed."""
        if self._eras.get(server) is era:
            return
        if era is None:
            del self._eras[server]
        else:
            self._eras[server] = era
        self._submit(SaveEra(server, None if era is None else era.value, time.time()))
