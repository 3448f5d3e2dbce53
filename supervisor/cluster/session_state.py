"""What a replica taking over a handshake-era MCP session restores: the session's
state as a JSON document in its ``gateway_sessions`` row (pure).

The client sees the same session: its negotiated protocol version, what it said it is
and can do, the log level it asked for, the tools ``tool_search`` activated (in
order), its "for the session" approvals, the listings it was last shown (so its
``list_changed`` notices compare against what it saw), its URL elicitations still
open, and how many turns it began. Calls in flight are not state: they end with the
replica that ran them. Resource subscriptions are not carried over either (the
servers' side of a subscription lives in the old replica's connections).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

VERSION = 1


@attrs.frozen(slots=True)
class SessionState:
    """One session's restorable state (see the module docstring)."""

    protocol_version: str
    client_info: Mapping[str, Any] | None = None
    client_capabilities: Mapping[str, Any] = attrs.field(factory=dict)
    log_level: str = "warning"
    activated: tuple[tuple[str, int], ...] = ()
    """Tool id → its activation's number."""
    approvals: tuple[tuple[str, str, str], ...] = ()
    """(permission, definition fingerprint, action) remembered for the session."""
    shown: tuple[tuple[str, str], ...] = ()
    """Listing kind → the canonical JSON the client was last shown."""
    elicitations: tuple[str, ...] = ()
    turns: int = 0

    def to_json(self) -> str:
        return json.dumps(
            {
                "v": VERSION,
                "protocol_version": self.protocol_version,
                "client_info": self.client_info,
                "client_capabilities": self.client_capabilities,
                "log_level": self.log_level,
                "activated": [list(pair) for pair in self.activated],
                "approvals": [list(triple) for triple in self.approvals],
                "shown": dict(self.shown),
                "elicitations": list(self.elicitations),
                "turns": self.turns,
            },
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> SessionState:
        """The state a row holds; ValueError for one this version cannot read."""
        try:
            data = json.loads(text)
            if data.get("v") != VERSION:
                raise ValueError(f"session state version {data.get('v')!r}, not {VERSION}")
            return cls(
                protocol_version=str(data["protocol_version"]),
                client_info=data.get("client_info"),
                client_capabilities=dict(data.get("client_capabilities") or {}),
                log_level=str(data.get("log_level", "warning")),
                activated=tuple((str(tool), int(n)) for tool, n in data.get("activated", [])),
                approvals=tuple((str(p), str(f), str(a)) for p, f, a in data.get("approvals", [])),
                shown=tuple((str(k), str(v)) for k, v in dict(data.get("shown") or {}).items()),
                elicitations=tuple(str(e) for e in data.get("elicitations", [])),
                turns=int(data.get("turns", 0)),
            )
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            raise ValueError(f"unreadable session state: {exc}") from None
