"""A tool's definition as pinning sees it: its description and its input schema.

Pinning (``actors/router/trust.py``) asks about a tool again when its definition moved
since it was last allowed. The definition is hashed whole (``fingerprint``: the pin,
and the key of remembered approvals) and by part (``part_hashes``: kept with the pin,
so that the question can say what changed). The connection actor, which learns a
server's current definitions when it lists, and the router, which shows them to
turns, both hash here, so the two always agree on what a definition is.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from typing import Any

import attrs

from actors.protocol.messages import Tool

__all__ = ["DefinitionParts", "Fingerprints", "changed_parts", "fingerprint", "part_hashes"]

_UNKNOWN_PARTS = "description or input schema"


def _jsonable(value: Any) -> Any:
    """Frozen mappings (MappingProxyType and the like) as dicts; anything else by repr."""
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    return repr(value)


def _canonical_json(value: Any) -> str:
    """Sorted-key compact ASCII JSON; never raises (server data can be anything)."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=_jsonable)
    except (TypeError, ValueError, RecursionError):
        pass
    try:  # mixed key types that cannot be sorted
        return repr(value)
    except RecursionError:  # nested deeper than the interpreter will walk
        return "<arguments nested too deeply to encode>"


def _sha256(text: str) -> str:
    # Interned: connections to the same server (per session, per person, replicas of
    # one command) list the same tools, and each keeps their hashes (freed with the last).
    return sys.intern(hashlib.sha256(text.encode("ascii", "backslashreplace")).hexdigest())


def fingerprint(description: str, input_schema: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON ``{"description", "inputSchema"}``: the pin."""
    return _sha256(_canonical_json({"description": description, "inputSchema": input_schema}))


@attrs.frozen(slots=True)
class DefinitionParts:
    """The hash of each part of a definition, to tell which part moved."""

    description: str
    input_schema: str


def part_hashes(description: str, input_schema: Mapping[str, Any]) -> DefinitionParts:
    """The parts of a definition, each hashed as ``fingerprint`` hashes the whole."""
    return DefinitionParts(_sha256(_canonical_json(description)), _sha256(_canonical_json(input_schema)))


def changed_parts(before: DefinitionParts | None, now: DefinitionParts) -> str:
    """What moved between two definitions whose fingerprints differ, in words
    (``description``, ``input schema``, or both); a pin kept without its parts (from
    before they were kept) cannot tell, and says so."""
    if before is None:
        return _UNKNOWN_PARTS
    moved = [
        name
        for name, changed in (
            ("description", before.description != now.description),
            ("input schema", before.input_schema != now.input_schema),
        )
        if changed
    ]
    return " and ".join(moved) or _UNKNOWN_PARTS


class Fingerprints(dict[str, str]):
    """The fingerprints of one listing's tools by name, each hashed on first use
    (``""``: the listing has no such tool). A dict, so that the common lookup, a
    fingerprint known already, costs one subscript and no call."""

    __slots__ = ("tools",)

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        super().__init__()
        self.tools = tools

    def __missing__(self, name: str) -> str:
        tool = self.tools.get(name)
        found = "" if tool is None else fingerprint(tool.description, tool.input_schema)
        self[name] = found
        return found
