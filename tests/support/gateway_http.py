"""A raw MCP-over-HTTP client for the ``/mcp`` tests: one JSON-RPC message per POST,
the session id and protocol version carried along, SSE bodies parsed with their ids."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import h11
import orjson

from tests.support.admin import EventStream, Http, Reply

ACCEPT_BOTH = "application/json, text/event-stream"
PROTOCOL = "2025-11-25"


@attrs.frozen
class Event:
    """One SSE event as sent: its id, retry and data (None: no data)."""

    id: str | None
    retry: int | None
    data: Any


def parse_sse(raw: bytes) -> list[Event]:
    """Every event of an SSE body (comments dropped)."""
    events = []
    for block in raw.decode().split("\n\n"):
        fields: dict[str, list[str]] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
        if not fields:
            continue
        data = "\n".join(fields.get("data", []))
        retry = fields.get("retry")
        events.append(
            Event(
                fields["id"][-1] if "id" in fields else None,
                int(retry[-1]) if retry else None,
                orjson.loads(data) if data.strip() else None,
            )
        )
    return events


def initialize(request_id: Any = 0, capabilities: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": dict(capabilities or {}),
            "clientInfo": {"name": "raw-test", "version": "1"},
        },
    }


def request(request_id: Any, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


class McpHttp:
    """One MCP session's worth of raw requests to ``/mcp``."""

    def __init__(self, http: Http) -> None:
        self.http = http
        self.session_id: str | None = None
        self.version = PROTOCOL

    def headers(self, extra: Mapping[str, str] | None = None, *, accept: str = ACCEPT_BOTH) -> dict[str, str]:
        headers = {"Accept": accept}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
            headers["MCP-Protocol-Version"] = self.version
        return {**headers, **(extra or {})}

    async def open(self, capabilities: Mapping[str, Any] | None = None) -> Reply:
        reply = await self.http.request(
            "POST", "/mcp", json=initialize(0, capabilities), headers=self.headers()
        )
        assert reply.status == 200, reply
        self.session_id = reply.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        note = await self.post(initialized)
        assert note.status == 202, note
        return reply

    async def post(
        self, message: Any, headers: Mapping[str, str] | None = None, *, accept: str = ACCEPT_BOTH
    ) -> Reply:
        return await self.http.request(
            "POST", "/mcp", json=message, headers=self.headers(headers, accept=accept)
        )

    async def call(self, request_id: Any, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """A request answered as JSON: its response."""
        reply = await self.post(request(request_id, method, params), accept="application/json")
        assert reply.status == 200 and reply.headers["content-type"] == "application/json", reply
        return reply.json()


async def events_until(stream: EventStream, predicate: Callable[[Event], bool]) -> list[Event]:
    """The SSE events of a streamed answer up to the first that ``predicate`` accepts
    (read raw: ``EventStream.next`` does not take a priming event's empty data)."""
    raw = b""
    while True:
        events = parse_sse(raw[: raw.rfind(b"\n\n") + 2]) if b"\n\n" in raw else []
        if any(predicate(event) for event in events):
            return events
        item = await stream._exchange.next_event()
        assert isinstance(item, h11.Data), f"the stream ended first; saw {events}"
        raw += bytes(item.data)


async def rest_raw(stream: EventStream) -> bytes:
    """Every byte of a streamed answer until it ends."""
    raw = b""
    while True:
        item = await stream._exchange.next_event()
        if not isinstance(item, h11.Data):
            return raw
        raw += bytes(item.data)
