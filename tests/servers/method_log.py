"""An ASGI middleware that records what an HTTP MCP server saw: for each JSON-RPC
message POSTed (a batch counts each), its method and the ``Mcp-Session-Id`` and
``MCP-Protocol-Version`` headers it came with. Wrap a server's app in it to check
what reached the wire (``MethodLog(app).seen``); the body is handed on unchanged."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import attrs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


async def read_body(receive: Receive) -> bytes:
    """A request's whole body, read from ``receive``."""
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = bool(message.get("more_body", False))
    return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app ``body`` (already read) first, then goes on
    with ``receive`` (a disconnect)."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


@attrs.frozen
class Seen:
    """One JSON-RPC message as the server received it (``method`` None: a response)."""

    method: str | None
    session: str | None
    version: str | None


class MethodLog:
    """Records every POSTed JSON-RPC message, then lets ``app`` serve the request."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.seen: list[Seen] = []

    @property
    def methods(self) -> list[str | None]:
        return [seen.method for seen in self.seen]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        self._record(scope, body)
        await self.app(scope, replaying(body, receive), send)

    def _record(self, scope: Scope, body: bytes) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        for item in parsed if isinstance(parsed, list) else [parsed]:
            method = item.get("method") if isinstance(item, dict) else None
            self.seen.append(Seen(method, headers.get("mcp-session-id"), headers.get("mcp-protocol-version")))
