"""The MCP messages the web-tier goldens send, in both protocol eras' words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PROTOCOL = "2025-11-25"  # the handshake era's newest
NEW_ERA = "2026-07-28"  # the per-request era
CLIENT_INFO = {"name": "golden-client", "version": "1"}
INITIALIZE: Mapping[str, Any] = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": CLIENT_INFO},
}
INITIALIZED: Mapping[str, Any] = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def rpc(request_id: Any, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-RPC request (``params`` left out when None)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message
