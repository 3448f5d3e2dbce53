"""What the store remembers of each shared server across starts: its last-known tool
list (``read_cached_tools``: searchable before the server lists its own) and the protocol
era it speaks (``EraMemory``).

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

from actors.log_events import get_logger
from actors.protocol.era import Era
from actors.protocol.errors import ProtocolError
from actors.protocol.messages import Tool
from actors.protocol.payloads import structure_tool
from supervisor.store import SaveEra, Store, StoreMessage

log = get_logger("supervisor.server_memory")


def read_cached_tools(store: Store, servers: Iterable[str]) -> dict[str, tuple[Tool, ...]]:
    """Last-known tool lists of configured servers (unreadable entries skipped)."""
    wanted = set(servers)
    cached: dict[str, tuple[Tool, ...]] = {}
    for server, (tools, _listed_at) in store.tool_lists().items():
        if server not in wanted:
            continue
        parsed = []
        for wire in tools:
            try:
                parsed.append(structure_tool(wire))
            except ProtocolError:
                continue
        cached[server] = tuple(parsed)
    return cached


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
