"""A tiny HTTP server on loopback for the browser harness's own tests: a folder's files, and
an event stream at ``/events`` that sends one event and stays open.

Every answer carries a strict Content-Security-Policy (scripts from the site only, nothing
inline), as the console's will, so a page that works here needs no inline script. ``paths``
records each request the server saw, to hold the browser's own network log against.
"""

from __future__ import annotations

import mimetypes
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import attrs
import trio

CSP = "default-src 'self'; script-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'"
_HEAD_LIMIT = 16_384


@attrs.define
class Site:
    url: str
    folder: Path
    paths: list[str] = attrs.field(factory=list)

    async def serve(self, stream: trio.SocketStream) -> None:
        with suppress(trio.BrokenResourceError):  # the page went away first
            await self._answer(stream)

    async def _answer(self, stream: trio.SocketStream) -> None:
        async with stream:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < _HEAD_LIMIT:
                chunk = await stream.receive_some()
                if not chunk:
                    return
                head += chunk
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            path = target.split("?", 1)[0]
            self.paths.append(path)
            if path == "/events":
                await _events(stream)
                return
            file = self.folder / (path.lstrip("/") or "index.html")
            if method != "GET" or ".." in path or not file.is_file():
                await _answer(stream, "404 Not Found", "text/plain", b"not found\n")
                return
            kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
            await _answer(stream, "200 OK", kind, file.read_bytes())


def _headers(status: str, kind: str, extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Security-Policy: {CSP}\r\n"
        f"Cache-Control: no-store\r\n{extra}\r\n"
    ).encode()


async def _answer(stream: trio.SocketStream, status: str, kind: str, body: bytes) -> None:
    extra = f"Content-Length: {len(body)}\r\nConnection: close\r\n"
    await stream.send_all(_headers(status, kind, extra) + body)


async def _events(stream: trio.SocketStream) -> None:
    """One event, then open until the page goes (or the site stops)."""
    await stream.send_all(_headers("200 OK", "text/event-stream") + b"data: hello\n\n")
    while await stream.receive_some():
        pass


@asynccontextmanager
async def static_site(folder: Path) -> AsyncIterator[Site]:
    """Serve ``folder`` on 127.0.0.1 (a free port) until the block ends."""
    async with trio.open_nursery() as nursery:
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listener.socket.getsockname()[1]
        site = Site(f"http://127.0.0.1:{port}", folder)
        nursery.start_soon(trio.serve_listeners, site.serve, [listener])
        yield site
        nursery.cancel_scope.cancel()
