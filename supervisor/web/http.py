"""HTTP answers for the apps that need no framework (``/mcp``, ``/v1/bridge``), in plain
ASGI: request headers, a response, and how it is sent.

What a client sees is what it saw when Quart answered these routes, byte for byte
(``tests/end_to_end/test_golden_web.py``): a JSON body with ``content-type`` and
``content-length`` after the headers the handler gave, a bodiless answer as Quart's
(``text/html; charset=utf-8``, length 0), a stream without a length, and the body sent
as one message then an empty last one.
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from contextlib import aclosing
from typing import Any

import attrs
import orjson
import trio
from hypercorn.typing import ASGISendCallable

from supervisor.web.routes import JSON, SSE

RawHeaders = Iterable[tuple[bytes, bytes]]
Scrub = Callable[[Any], Any]
"""What masks the config's secrets in a JSON-ready value."""


class Headers:
    """A request's headers, looked up without regard to case (as werkzeug's ``Headers``).
    The names are lowered once here: a request asks for about ten of them."""

    __slots__ = ("_by_name", "_pairs")

    def __init__(self, raw: RawHeaders) -> None:
        self._pairs = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in raw]
        self._by_name: dict[str, list[str]] = {}
        for name, value in self._pairs:
            self._by_name.setdefault(name.lower(), []).append(value)

    def getlist(self, key: str) -> list[str]:
        """Every value of ``key``, in the order sent."""
        return list(self._by_name.get(key.lower(), ()))

    def get(self, key: str) -> str | None:
        """The first value of ``key``, or None."""
        values = self._by_name.get(key.lower())
        return values[0] if values else None

    def items(self) -> list[tuple[str, str]]:
        """Every (name, value) pair, in the order sent."""
        return list(self._pairs)


def content_length(headers: Headers) -> int | None:
    """The declared body length; None for a chunked body or none declared (werkzeug's
    reading: a value that is not a number counts as 0)."""
    coding = headers.get("Transfer-Encoding")
    declared = headers.get("Content-Length")
    if declared is None or (coding is not None and "chunked" in coding.lower()):
        return None
    try:
        return max(0, int(declared.strip()))
    except ValueError:
        return 0


_Q = re.compile(r"(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)\Z")


def accepts(headers: Headers, media: str = SSE) -> bool:
    """Whether ``Accept`` names ``media`` itself with a quality above 0 (``*/*`` does
    not count: a client that can read a stream says so). An item with parameters other
    than ``q``, or with a ``q`` that is not a quality, is another item."""
    for item in ",".join(headers.getlist("Accept")).split(","):
        kind, *parameters = (part.strip() for part in item.split(";"))
        quality, others = 1.0, False
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() != "q":
                others = True
            elif _Q.fullmatch(value.strip(" \t")) is None:
                break
            else:
                quality = float(value)
        else:
            if kind.lower() == media and quality > 0 and not others:
                return True
    return False


DEFAULT_TIMEOUT = -1.0
"""A response sent within the app's response timeout (a stream has none: None)."""


@attrs.frozen(slots=True)
class Response:
    """One HTTP answer: status, headers in order, and a body of bytes or a stream."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | AsyncGenerator[bytes, None] = b""
    timeout: float | None = DEFAULT_TIMEOUT

    def with_headers(self, headers: Mapping[str, str]) -> Response:
        """The same answer with ``headers`` after its own."""
        return attrs.evolve(self, headers=(*self.headers, *headers.items()))


def json_response(
    data: Any, status: int = 200, headers: Mapping[str, str] | None = None, *, scrub: Scrub | None = None
) -> Response:
    """A JSON answer (``scrub``: the config's secret values masked in it first)."""
    body = orjson.dumps(data if scrub is None else scrub(data))
    return Response(
        status, (*(headers or {}).items(), ("Content-Type", JSON), ("Content-Length", str(len(body)))), body
    )


def empty_response(status: int) -> Response:
    """A bodiless answer (202, 204), with the headers Quart gave one."""
    return Response(status, (("Content-Type", "text/html; charset=utf-8"), ("Content-Length", "0")))


def stream_response(body: AsyncGenerator[bytes, None], headers: Mapping[str, str]) -> Response:
    """A ``text/event-stream`` answer: no length, no response timeout (it ends by itself)."""
    return Response(200, (*headers.items(), ("Content-Type", SSE)), body, timeout=None)


def encoded(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """Headers as ASGI sends them (names lowercased)."""
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]


async def send_response(send: ASGISendCallable, response: Response, default_timeout: float | None) -> None:
    """Send ``response``, within its timeout (``DEFAULT_TIMEOUT``: ``default_timeout``;
    None: none): a client that reads too slowly is cut off, not waited for."""
    timeout = default_timeout if response.timeout == DEFAULT_TIMEOUT else response.timeout
    with trio.move_on_after(math.inf if timeout is None else timeout):
        await send(
            {"type": "http.response.start", "status": response.status, "headers": encoded(response.headers)}
        )
        if isinstance(response.body, bytes):
            await send({"type": "http.response.body", "body": response.body, "more_body": True})
        else:
            async with aclosing(response.body) as chunks:
                async for chunk in chunks:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def send_refusal(send: ASGISendCallable, response: Response) -> None:
    """``response`` as the answer to a WebSocket that is not accepted (its handshake's
    HTTP response, as ASGI's denial extension sends it)."""
    await send(
        {
            "type": "websocket.http.response.start",
            "status": response.status,
            "headers": encoded(response.headers),
        }
    )
    body = response.body if isinstance(response.body, bytes) else b""
    await send({"type": "websocket.http.response.body", "body": body, "more_body": False})
