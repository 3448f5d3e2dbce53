"""No permessage-deflate on the admin server's WebSockets (the bridge's).

Hypercorn accepts permessage-deflate whenever a client offers it (browsers always
do) and has no setting to decline it. Its zlib then runs in the event loop's thread
for every frame both ways: measured on ``/v1/bridge``, a `tools/call` round trip
took 50 to 95 µs more at p50 and ``serve`` 18 to 73 µs more CPU per call than the same
client not offering it (``benchmarks/RESULTS.md``, the bridge's round 3), and a
large frame (the bound is 4 MiB) would hold every other socket while it is
compressed. Bridge frames are small JSON on a LAN or loopback, where latency is what
counts. ``install`` wraps Hypercorn's accept (as ``heartbeat.py`` wraps its pings)
so a server whose config is an ``AdminHypercornConfig`` forgets the offer: the
client is answered without ``Sec-WebSocket-Extensions`` and sends plain frames. An
embedding host's own Hypercorn keeps its behaviour. If a Hypercorn release renames
the method, ``install`` does nothing and ``tests/bridge/test_bridge_asgi.py`` fails.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from hypercorn.protocol.ws_stream import WSStream

from supervisor.admin.refusals import AdminHypercornConfig

_MARK = "_mcp_supervisor_no_deflate"


def install() -> None:
    """Decline permessage-deflate on admin servers (idempotent)."""
    original: Callable[[Any, Any], Awaitable[None]] | None = getattr(WSStream, "_accept", None)
    if original is None or getattr(original, _MARK, False):
        return

    async def accept(self: Any, message: Any) -> None:
        if isinstance(self.config, AdminHypercornConfig):
            self.handshake.extensions = None  # as if none were offered
        await original(self, message)

    setattr(accept, _MARK, True)
    setattr(WSStream, "_accept", accept)  # noqa: B010
