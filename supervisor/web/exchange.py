"""One HTTP exchange of a plain ASGI app, kept as Quart kept it.

The request body is read in a task beside the handler (it may refuse a body by its
declared length before reading any of it), a client that hangs up cancels the handler
(and the answer being sent), and the answer is sent within the response timeout. What
Quart did not give ``/mcp``: the body timeout. A body that has not arrived whole
``body_timeout_s`` after the request began is ``BodyTimeout`` to whoever reads it, so a
client that sends part of a body cannot hold a connection for ever.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

import attrs
import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, HTTPScope

from supervisor.web.http import Headers, Response, send_response

BODY_TIMEOUT_S = 30.0
"""How long a request's body may take to arrive, every app of the server alike."""
RESPONSE_TIMEOUT_S = 60.0
"""How long an answer that is not a stream may take to send (Quart's default)."""


class BodyTimeout(Exception):
    """The request body did not arrive whole within the body timeout."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"the request body did not arrive within {timeout_s:g} s")
        self.timeout_s = timeout_s


class RequestBody:
    """The body as it arrives: iterate it for its chunks; it ends with the body."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._deadline = trio.current_time() + timeout_s
        self._chunks: deque[bytes] = deque()
        self._complete = False
        self._changed = trio.Event()

    def append(self, chunk: bytes) -> None:
        if chunk:
            self._chunks.append(chunk)
            self._wake()

    def complete(self) -> None:
        self._complete = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            if self._chunks:
                yield self._chunks.popleft()
            elif self._complete:
                return
            else:
                with trio.move_on_at(self._deadline):
                    await self._changed.wait()
                    continue
                raise BodyTimeout(self.timeout_s)


@attrs.frozen(slots=True)
class Request:
    """What a handler knows of its request."""

    scope: HTTPScope
    headers: Headers
    body: RequestBody

    @property
    def method(self) -> str:
        return str(self.scope["method"])


Handler = Callable[[Request], Awaitable[Response]]


async def exchange(
    scope: HTTPScope,
    receive: ASGIReceiveCallable,
    send: ASGISendCallable,
    handler: Handler,
    *,
    headers: Headers,
    body_timeout_s: float = BODY_TIMEOUT_S,
    response_timeout_s: float | None = RESPONSE_TIMEOUT_S,
    on_error: Callable[[], Response],
) -> None:
    """Answer one request with ``handler`` (``on_error()`` if it raises)."""
    body = RequestBody(body_timeout_s)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_read, receive, body, nursery.cancel_scope)
        try:
            response = await handler(Request(scope, headers, body))
        except Exception:
            response = on_error()
        await send_response(send, response, response_timeout_s)
        nursery.cancel_scope.cancel()


async def _read(receive: ASGIReceiveCallable, body: RequestBody, hung_up: trio.CancelScope) -> None:
    """The request body into ``body``; the client's hang-up cancels ``hung_up``."""
    while True:
        message = await receive()
        if message["type"] == "http.request":
            body.append(message.get("body", b""))
            if not message.get("more_body", False):
                body.complete()
        elif message["type"] == "http.disconnect":
            hung_up.cancel()
            return
