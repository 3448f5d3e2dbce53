"""Tool ids: ``<server>_<tool>``, always, sanitized, at most 64 characters.

Namespacing is unconditional (not only on collision) so that adding a server never
renames tools the model already learned. The server part keeps ``[A-Za-z0-9_]``, the
tool part ``[A-Za-z0-9_-]``; anything else becomes ``_``. An id over 64 characters is
cut and ends in a short hash of the original pair, and ids that still collide after
sanitizing all get such a hash: the rule depends only on the names, never on the
order in which servers were listed, so ids are stable across restarts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

MAX_ID_LENGTH = 64
_HASH_LENGTH = 6
_SERVER_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
_TOOL_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def sanitize_server(name: str) -> str:
    """The server part of an id."""
    return _SERVER_UNSAFE.sub("_", name) or "_"


def sanitize_tool(name: str) -> str:
    """The tool part of an id."""
    return _TOOL_UNSAFE.sub("_", name) or "_"


def _digest(server: str, tool: str, salt: int = 0) -> str:
    key = f"{server}\x00{tool}" + (f"\x00{salt}" if salt else "")
    return hashlib.sha256(key.encode()).hexdigest()[:_HASH_LENGTH]


def _with_hash(base: str, server: str, tool: str, salt: int = 0) -> str:
    keep = MAX_ID_LENGTH - _HASH_LENGTH - 1
    return f"{base[:keep]}_{_digest(server, tool, salt)}"


def base_id(server: str, tool: str) -> str:
    """The id before collision handling (already within the length limit)."""
    raw = f"{sanitize_server(server)}_{sanitize_tool(tool)}"
    if len(raw) > MAX_ID_LENGTH:
        return _with_hash(raw, server, tool)
    return raw


def assign_ids(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Ids for every (server, tool) pair, unique, independent of the pairs' order."""
    pairs = list(dict.fromkeys(pairs))
    bases = {pair: base_id(*pair) for pair in pairs}
    owners: dict[str, int] = {}
    for base in bases.values():
        owners[base] = owners.get(base, 0) + 1
    ids = {pair: (_with_hash(base, *pair) if owners[base] > 1 else base) for pair, base in bases.items()}
    # A hashed id could in theory equal another pair's plain id; settle it by hashing again.
    seen: dict[str, tuple[str, str]] = {}
    for pair in sorted(ids):
        tool_id = ids[pair]
        salt = 0
        while tool_id in seen:
            # Salted: an id already cut to full length would otherwise hash to itself forever.
            salt += 1
            tool_id = _with_hash(tool_id, *pair, salt)
        seen[tool_id] = pair
        ids[pair] = tool_id
    return ids


class IdBook:
    """Ids of every (server, tool) pair, kept up to date one server at a time.

    ``assign_ids`` over all pairs is the definition; the book gives the same answer
    while touching only the base-id groups that a server's change affects, so a
    change costs O(that server's tools), whatever the size of the catalog.
    """

    __slots__ = ("_by_server", "_ids", "_owners")

    def __init__(self) -> None:
        self._owners: dict[str, set[tuple[str, str]]] = {}
        self._ids: dict[tuple[str, str], str] = {}
        self._by_server: dict[str, tuple[str, ...]] = {}

    def ids_of(self, server: str) -> dict[str, str]:
        """Tool name → id for one server."""
        return {tool: self._ids[(server, tool)] for tool in self._by_server.get(server, ())}

    def replace(self, server: str, tools: Iterable[str]) -> set[str]:
        """Set one server's tool names; return the *other* servers whose ids changed."""
        old = self._by_server.get(server, ())
        new = tuple(dict.fromkeys(tools))
        affected: set[str] = set()
        for tool in old:
            base = base_id(server, tool)
            group = self._owners[base]
            group.discard((server, tool))
            if not group:
                del self._owners[base]
            self._ids.pop((server, tool), None)
            affected.add(base)
        for tool in new:
            base = base_id(server, tool)
            self._owners.setdefault(base, set()).add((server, tool))
            affected.add(base)
        if new:
            self._by_server[server] = new
        else:
            self._by_server.pop(server, None)
        pairs = [pair for base in affected for pair in self._owners.get(base, ())]
        others: set[str] = set()
        for pair, tool_id in assign_ids(pairs).items():
            if pair[0] != server and self._ids.get(pair) != tool_id:
                others.add(pair[0])
            self._ids[pair] = tool_id
        return others
