"""``serve`` on a lean HTTP/1.1 server instead of Hypercorn: a prototype, benchmarks only.

    python benchmarks/lean_mcp.py serve --config FILE --state-dir DIR   # as mcp-supervisor serve

Issue 37 allows ``/mcp`` a cheaper HTTP/1.1 path of its own (a compiled parser on Trio
streams) if the HTTP server stays the largest cost. Before building that into the
product, this measures what it would give: the same ``serve`` (the same apps, guard,
sessions and answers, called as ASGI), with Hypercorn's ``worker_serve`` swapped for
``lean_serve`` below: ``httptools`` parses, each connection is one task, a request's app
runs in that task (no task, queue or idle timer per request), and an answer with a
length is one ``send``. ``bench_fronts.py --only ours ours-lean mcp-proxy`` runs it as
the ``ours-lean`` front.

What it leaves out, so it is no product: a client's hang-up is seen only between
requests (Hypercorn reads while the app runs), no ``Expect: 100-continue``, no
pipelining, no read or keep-alive timeout, no header size limit, no TLS, no graceful
drain (shutdown cancels), no WebSocket. Needs ``httptools``, which the project does not
depend on: ``.venv/bin/pip install httptools``.
"""

from __future__ import annotations

import socket
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from typing import Any

import trio
from hypercorn.trio.lifespan import Lifespan

try:
    import httptools
except ImportError:  # pragma: no cover - by hand only
    sys.exit("benchmarks/lean_mcp.py needs httptools: .venv/bin/pip install httptools")

MAX_RECV = 65536
BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_REASONS = {200: b"OK", 202: b"Accepted", 204: b"No Content", 400: b"Bad Request", 404: b"Not Found"}


class _Date:
    """The ``date`` header, made once a second (as Hypercorn's)."""

    def __init__(self) -> None:
        self.second = 0
        self.value = b""

    def now(self) -> bytes:
        second = int(time.time())
        if second != self.second:
            self.second, self.value = second, formatdate(second, usegmt=True).encode()
        return self.value


_DATE = _Date()


class _Parsed:
    """httptools' callbacks: the requests read whole so far."""

    def __init__(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.done: deque[tuple[bytes, list[tuple[bytes, bytes]], bytes]] = deque()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.done.append((self.url, self.headers, b"".join(self.body)))
        self.url, self.headers, self.body = b"", [], []


class _Exchange:
    """One request's ``receive`` and ``send``, as Hypercorn gives them to the app."""

    def __init__(self, stream: trio.SocketStream, body: bytes, keep_alive: bool) -> None:
        self.stream = stream
        self.pending: deque[dict[str, Any]] = deque(
            [{"type": "http.request", "body": body, "more_body": False}]
        )
        self.finished = trio.Event()
        self.keep_alive = keep_alive
        self.head = b""
        self.sized = False
        self.held: list[bytes] = []

    async def receive(self) -> dict[str, Any]:
        if self.pending:
            return self.pending.popleft()
        await self.finished.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            status = int(message["status"])
            lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))]
            headers = list(message.get("headers", ()))
            self.sized = any(name.lower() == b"content-length" for name, _ in headers)
            if not self.sized:
                headers.append((b"transfer-encoding", b"chunked"))
            headers.append((b"date", _DATE.now()))
            if not self.keep_alive:
                headers.append((b"connection", b"close"))
            lines += [b"%s: %s\r\n" % (name, value) for name, value in headers]
            self.head = b"".join(lines) + b"\r\n"
            if not self.sized:  # a stream: its head goes at once
                await self.stream.send_all(self.head)
            return
        if kind != "http.response.body":
            return
        body, more = message.get("body", b""), message.get("more_body", False)
        if self.sized:
            self.held.append(body)
            if not more:
                await self.stream.send_all(self.head + b"".join(self.held))
                self.finished.set()
            return
        if body:
            await self.stream.send_all(b"%x\r\n%s\r\n" % (len(body), body))
        if not more:
            await self.stream.send_all(b"0\r\n\r\n")
            self.finished.set()


async def _connection(app: Any, stream: trio.SocketStream, client: Any, server: Any) -> None:
    parsed = _Parsed()
    parser = httptools.HttpRequestParser(parsed)
    async with stream:
        while True:
            try:
                data = await stream.receive_some(MAX_RECV)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                return
            try:
                parser.feed_data(data)
            except httptools.HttpParserError:
                await stream.send_all(BAD_REQUEST)
                return
            while parsed.done:
                url, headers, body = parsed.done.popleft()
                path, _, query = url.partition(b"?")
                scope = {
                    "type": "http",
                    "http_version": parser.get_http_version(),
                    "asgi": {"spec_version": "2.1", "version": "3.0"},
                    "method": parser.get_method().decode("ascii"),
                    "scheme": "http",
                    "path": path.decode("ascii"),
                    "raw_path": path,
                    "query_string": query,
                    "root_path": "",
                    "headers": headers,
                    "client": client,
                    "server": server,
                    "state": {},
                    "extensions": {},
                }
                exchange = _Exchange(stream, body, parser.should_keep_alive())
                threads = (trio.to_thread.run_sync, trio.from_thread.run)
                await app(scope, exchange.receive, exchange.send, *threads)
                exchange.finished.set()
                if not exchange.keep_alive:
                    return


async def lean_serve(
    app: Any,
    config: Any,
    *,
    sockets: Any = None,
    shutdown_trigger: Callable[..., Awaitable[None]] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Hypercorn's ``worker_serve``, as ``serve`` calls it, on the lean server."""
    listener: socket.socket = sockets.insecure_sockets[0]
    listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(listener))]
    host, port = listener.getsockname()[:2]

    async def handler(stream: trio.SocketStream) -> None:
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        peer, own = stream.socket.getpeername()[:2], stream.socket.getsockname()[:2]
        await _connection(app, stream, peer, own)

    lifespan = Lifespan(app, config, {})  # Quart's startup, as Hypercorn runs it
    async with trio.open_nursery() as nursery:
        await nursery.start(lifespan.handle_lifespan)
        await lifespan.wait_for_startup()
        nursery.start_soon(trio.serve_listeners, handler, listeners)
        task_status.started([f"http://{host}:{port}"])
        if shutdown_trigger is not None:
            await shutdown_trigger()
            nursery.cancel_scope.cancel()


def main() -> int:
    from supervisor.cli.main import main as cli
    from supervisor.server import serving

    serving.worker_serve = lean_serve  # type: ignore[assignment]
    return cli(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
