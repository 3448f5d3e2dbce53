"""Which era a gateway client speaks, from one HTTP request (pure).

A handshake-era client opens with ``initialize`` and then names its session
(``Mcp-Session-Id``). A per-request-era (2026-07-28) client has no session: every
request says its protocol version, in the ``MCP-Protocol-Version`` header and in
``_meta``, and ``server/discover`` is its first word.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from actors.protocol.messages import (
    META_PROTOCOL_VERSION,
    MODERN_PROTOCOL_VERSIONS,
    SUPPORTED_PROTOCOL_VERSIONS,
)
from supervisor.gateway.outlet import Outlet
from supervisor.gateway.traced import Arrival


def is_new_era(message: Mapping[str, Any], protocol_header: str | None, session_id: str | None) -> bool:
    """Whether ``message`` (one JSON-RPC object) comes from a per-request-era client.

    Without a session, a message that names a version of neither era (the header or
    ``_meta``: ``2027-01-01``, say) is taken as one too: it has no handshake behind it,
    and the era's -32022 tells it the versions we speak; but ``initialize`` is the
    handshake's unless it names 2026-07-28 (it negotiates the version itself)."""
    if session_id is not None:
        return False
    method = message.get("method")
    if method in ("server/discover", "subscriptions/listen"):
        return True
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    named = [protocol_header, meta.get(META_PROTOCOL_VERSION) if isinstance(meta, Mapping) else None]
    if any(version in MODERN_PROTOCOL_VERSIONS for version in named):
        return True
    return method != "initialize" and any(
        version is not None and version not in SUPPORTED_PROTOCOL_VERSIONS for version in named
    )


class NewEraHandler(Protocol):
    """What the HTTP front hands a per-request-era message to (``stateless.py``)."""

    async def receive(
        self,
        message: Mapping[str, Any],
        outlet: Outlet,
        tenant: str,
        arrival: Arrival | None = None,
        person: str | None = None,
    ) -> dict[str, Any] | None:
        """The response to send (None for a notification); related messages go to
        ``outlet`` (the POST's SSE stream) while it is answered. ``arrival`` says how it
        came, for its SERVER span (None while traces are off); ``person``, who signed
        in (None: the tenant's name)."""

    async def check_headers(
        self,
        message: Mapping[str, Any],
        param_headers: Mapping[str, str],
        tenant: str,
        person: str | None = None,
    ) -> dict[str, Any] | None:
        """The error response when a request's ``Mcp-Param-*`` headers (names
        lowercased) do not repeat its body, else None."""

    def holder_of(self, state: Any, tenant: str) -> str | None:
        """The replica run holding the call an authentic ``requestState`` of ``tenant``
        names, when that is another run than this one; else None."""
