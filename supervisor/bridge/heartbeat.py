"""The bridge's heartbeats: WebSocket pings sent by Hypercorn, ended soon after their socket.

Hypercorn pings every ``websocket_ping_interval`` seconds (``bridge.heartbeat_s``)
from a task of the connection, which sleeps the whole interval before it looks
whether its socket closed. The connection lives as long as that task, and the admin
server's drain waits for every connection: a socket closed just before a shutdown
held the drain for Hypercorn's whole graceful timeout. ``install`` wraps that one
method (as ``admin/refusals.py`` wraps another) so the task wakes every ``TICK_S``
to look, and ends within a tick of its socket. If a Hypercorn release renames the
method, ``install`` does nothing, and the bridge's drain test
(``tests/bridge/test_bridge_hub.py``, a shutdown right after a close) fails.
"""

from __future__ import annotations

from typing import Any

from hypercorn.protocol.ws_stream import WSStream
from wsproto.connection import ConnectionState
from wsproto.events import Ping

TICK_S = 0.5
_MARK = "_mcp_supervisor_pings_end"


def install() -> None:
    """Make Hypercorn's ping task end within a tick of its socket (idempotent)."""
    original = getattr(WSStream, "_send_pings", None)
    if original is None or getattr(original, _MARK, False):
        return

    def open_(stream: Any) -> bool:
        return not stream.closed and stream.connection.state is ConnectionState.OPEN

    async def send_pings(self: Any) -> None:
        interval = self.config.websocket_ping_interval
        while open_(self):
            await self._send_wsproto_event(Ping())
            waited = 0.0
            while waited < interval and open_(self):
                step = min(TICK_S, interval - waited)
                await self.context.sleep(step)
                waited += step

    setattr(send_pings, _MARK, True)
    setattr(WSStream, "_send_pings", send_pings)  # noqa: B010
