"""Where a client request's related messages go, and the requests we send a client.

An ``Outlet`` is one stream to one client: the SSE stream of a POST (Streamable
HTTP), the GET stream, or stdout (the stdio front). Progress of a call and the
requests a backend asks while serving it (sampling, elicitation, roots) go to the
outlet of the client request that caused them, so no other client ever sees them.

``ClientRequests`` numbers the requests we send one client (ids ``s-1``, ``s-2``, …:
a string, so they never collide with the client's own numbering) and matches the
client's answers to them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, Protocol

import trio

from actors.log_events import get_logger

log = get_logger("supervisor.gateway")


class Outlet(Protocol):
    """One stream to one client."""

    async def send(self, message: Mapping[str, Any]) -> None:
        """Send one JSON-RPC message (a notification or a request) to the client."""


class ClientRefused(Exception):
    """The client answered our request with a JSON-RPC error (or never will: it left)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ClientRequests:
    """The requests we sent one client, awaiting its answers."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiting: dict[str, trio.MemorySendChannel[Mapping[str, Any]]] = {}
        self._closed: str | None = None

    def __len__(self) -> int:
        return len(self._waiting)

    async def ask(self, outlet: Outlet, method: str, params: Any) -> Mapping[str, Any]:
        """Send ``method`` to the client through ``outlet`` and wait for its result.

        Raises ``ClientRefused`` for an error answer, or when the client has gone
        (``close``). Cancelling the caller forgets the request (a late answer is
        dropped)."""
        if self._closed is not None:
            raise ClientRefused(-32603, self._closed)
        request_id = f"s-{next(self._ids)}"
        send, receive = trio.open_memory_channel[Mapping[str, Any]](1)
        self._waiting[request_id] = send
        try:
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
            if params is not None:
                message["params"] = params
            await outlet.send(message)
            try:
                answer = await receive.receive()
            except trio.EndOfChannel:
                raise ClientRefused(-32603, self._closed or "the client went away") from None
        finally:
            self._waiting.pop(request_id, None)
        error = answer.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, Mapping) else None
            text = error.get("message") if isinstance(error, Mapping) else None
            raise ClientRefused(
                code if isinstance(code, int) else -32603,
                text if isinstance(text, str) else f"the client refused {method}",
            )
        result = answer.get("result")
        if not isinstance(result, Mapping):
            raise ClientRefused(-32603, f"the client's answer to {method} has no result object")
        return result

    def deliver(self, message: Mapping[str, Any]) -> bool:
        """Hand a client's response to the request waiting for it; False when it is
        not an answer to one of ours (unknown or late id)."""
        send = self._waiting.get(message.get("id"))  # type: ignore[arg-type]
        if send is None:
            return False
        try:
            send.send_nowait(message)
        except (trio.WouldBlock, trio.ClosedResourceError):
            return False  # answered twice: the first answer stands
        return True

    def close(self, reason: str) -> None:
        """The client is gone: every request waiting on it fails with ``reason``."""
        self._closed = reason
        for send in self._waiting.values():
            send.close()
