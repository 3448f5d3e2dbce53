"""The conformance fixture: an MCP server of ours with everything the conformance
suite's SERVER scenarios assume (``@modelcontextprotocol/conformance`` 0.1.16 and
0.2.0-alpha.12), built on the official Python SDK's ``MCPServer``.

    python tests/servers/everything_server.py              # stdio
    python tests/servers/everything_server.py --http 3001  # Streamable HTTP at /mcp

The SDK serves both protocol eras on one endpoint (``initialize`` sessions and the
per-request 2026-07-28 era). ``.ci/conformance`` runs the server scenarios against this
fixture directly (so the fixture is honest) and through ``mcp-supervisor serve``'s
``/mcp`` with this fixture behind it over stdio; tests/project/test_everything_fixture.py
checks that the tools do what the scenarios look for. The names, texts and payloads
in its parts are the scenarios' contract: change them only with the suite.

The parts, each registering on the one server of everything_app.py: everything_tools.py
(plain tools), everything_asks.py (sampling and elicitation through the SDK's resolvers),
everything_input.py (requests under keys of their own: input-required results in the
2026-07-28 era, the same requests mid-call in the handshake era), everything_resources.py
(resources, prompts, completion, logging level, subscriptions). Every tool that asks the
client asks in both eras, so a gateway may reach it over a connection of either era.
"""

from __future__ import annotations

import argparse

import everything_asks
import everything_input
import everything_resources
import everything_tools
from everything_app import server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.types import JSONRPCMessage

PARTS = (everything_tools, everything_asks, everything_input, everything_resources)  # import = register


class SseEvents(EventStore):
    """Every event in memory, so a client may resume a stream (``Last-Event-ID``)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = str(len(self.events) + 1)
        self.events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for s, e, _ in self.events if e == last_event_id), None)
        if stream is None:
            return None
        for stream_id, event_id, message in self.events[int(last_event_id) :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT/mcp"
    )
    args = parser.parse_args()
    if args.http is None:
        server.run()
    else:  # 100 ms: the SSE retry hint the polling scenario waits out
        server.run("streamable-http", port=args.http, event_store=SseEvents(), retry_interval=100)


if __name__ == "__main__":
    main()
