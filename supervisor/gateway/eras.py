"""Which era a gateway client speaks, from one HTTP request (pure).

A handshake-era client opens with ``initialize`` and then names its session
(``Mcp-Session-Id``). A per-request-era (2026-07-28) client has no session: every
request says its protocol version, in the ``MCP-Protocol-Version`` header and in
``_meta``, and ``server/discover`` is its first word.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from actors.protocol.messages import META_PROTOCOL_VERSION, MODERN_PROTOCOL_VERSIONS
from supervisor.gateway.outlet import Outlet


def is_new_era(message: Mapping[str, Any], protocol_header: str | None, session_id: str | None) -> bool:
    """Whether ``message`` (one JSON-RPC object) comes from a per-request-era client."""
    if session_id is not None:
        return False
    if message.get("method") in ("server/discover", "subscriptions/listen"):
        return True
    if protocol_header in MODERN_PROTOCOL_VERSIONS:
        return True
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return isinstance(meta, Mapping) and meta.get(META_PROTOCOL_VERSION) in MODERN_PROTOCOL_VERSIONS


class NewEraHandler(Protocol):
    """What the HTTP front hands a per-request-era message to (``stateless.py``)."""

    async def receive(self, message: Mapping[str, Any], outlet: Outlet, tenant: str) -> dict[str, Any] | None:
        """The response to send (None for a notification); related messages go to
        ``outlet`` (the POST's SSE stream) while it is answered."""

    async def check_headers(
        self, message: Mapping[str, Any], param_headers: Mapping[str, str], tenant: str
    ) -> dict[str, Any] | None:
        """The error response when a request's ``Mcp-Param-*`` headers (names
        lowercased) do not repeat its body, else None."""
