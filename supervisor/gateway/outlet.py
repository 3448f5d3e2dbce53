"""Where a client request's related messages go.

An ``Outlet`` is one stream to one client: the SSE stream of a POST (Streamable
HTTP), the GET stream, or stdout (the stdio front). Progress of a call and the
requests a backend asks while serving it (sampling, elicitation, roots) go to the
outlet of the client request that caused them, so no other client ever sees them.
The requests we send a client are numbered, and its answers matched to them, by the
protocol core's server session (``actors/protocol/server_session.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Outlet(Protocol):
    """One stream to one client."""

    async def send(self, message: Mapping[str, Any]) -> None:
        """Send one JSON-RPC message (a notification or a request) to the client."""
