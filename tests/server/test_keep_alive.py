"""Keep-alive connections of ``serve``'s Hypercorn (``hypercorn_patches.IdleTimer``): an
idle connection is closed after ``keep_alive_timeout``, a busy one is not, and one idle
at shutdown is closed at once, so the drain does not wait for it. A real server on a
loopback port, a raw socket as the client."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio
import trio.testing
from hypercorn.config import Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.trio.task_group import TaskGroup
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.utils import wrap_app

from supervisor.server.hypercorn_patches import IdleTimer, ServeConfig, install_all

REQUEST = b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
FAST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


async def app(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["path"] == "/slow":  # longer than the keep-alive timeout
        await trio.sleep(0.4)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok", "more_body": False})


@asynccontextmanager
async def server(keep_alive_s: float) -> AsyncIterator[tuple[int, trio.Event]]:
    install_all()
    config = ServeConfig()
    config.keep_alive_timeout = keep_alive_s
    config.graceful_timeout = 10.0
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(
            partial(
                worker_serve,
                wrap_app(app, config.wsgi_max_body_size, None),  # type: ignore[arg-type]
                config,
                sockets=Sockets([], [listener], []),
                shutdown_trigger=shutdown.wait,
            )
        )
        yield listener.getsockname()[1], shutdown
        shutdown.set()
        began = trio.current_time()
    # Not Hypercorn's graceful timeout (10 s here): no connection is left waiting.
    assert trio.current_time() - began < 3, "the drain waited for a connection"


async def ask(stream: trio.SocketStream, request: bytes) -> bytes:
    await stream.send_all(request)
    answer = b""
    while not answer.endswith(b"ok"):
        chunk = await stream.receive_some(4096)
        assert chunk, f"the server closed the connection before answering; it sent {answer!r}"
        answer += chunk
    return answer


async def closed_by_server(stream: trio.SocketStream) -> bool:
    return await stream.receive_some(4096) == b""


async def test_an_idle_connection_is_closed_after_the_keep_alive_timeout_and_a_busy_one_is_not() -> None:
    async with server(0.2) as (port, _):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        assert (await ask(stream, FAST)).startswith(b"HTTP/1.1 200")
        assert (await ask(stream, REQUEST)).startswith(b"HTTP/1.1 200")  # busy past 0.2 s: answered
        assert (await ask(stream, FAST)).startswith(b"HTTP/1.1 200")  # still open
        began = trio.current_time()
        with trio.fail_after(5):
            assert await closed_by_server(stream)
        assert trio.current_time() - began >= 0.15  # idle for its timeout first
        await stream.aclose()


async def test_a_connection_idle_at_shutdown_is_closed_at_once_and_a_busy_one_once_answered() -> None:
    async with server(30.0) as (port, shutdown):
        idle = await trio.open_tcp_stream("127.0.0.1", port)
        busy = await trio.open_tcp_stream("127.0.0.1", port)
        assert (await ask(idle, FAST)).startswith(b"HTTP/1.1 200")
        await busy.send_all(REQUEST)
        await trio.sleep(0.1)  # the slow request is in the app
        shutdown.set()
        with trio.fail_after(5):  # not the 30 s keep-alive
            assert await closed_by_server(idle)
            answer = b""
            while chunk := await busy.receive_some(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok")
        await idle.aclose()
        await busy.aclose()


class _Server:
    """What ``IdleTimer`` uses of Hypercorn's ``TCPServer``; its closings are kept."""

    def __init__(self, keep_alive_s: float) -> None:
        self.config = ServeConfig()
        self.config.keep_alive_timeout = keep_alive_s
        self.context = WorkerContext(None)
        self.closed_at: list[float] = []

    async def _initiate_server_close(self) -> None:
        self.closed_at.append(trio.current_time())


async def test_the_timer_counts_from_the_last_time_its_connection_went_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = _Server(0.2)
    timer = IdleTimer(server)
    async with trio.open_nursery() as nursery:
        group = TaskGroup()
        group._nursery = nursery
        began = trio.current_time()
        await timer.restart(group, None)  # idle; busy and idle again before its task runs
        await timer.stop()
        await timer.restart(group, None)
        await trio.sleep(0.1)
        await timer.stop()
        await timer.restart(group, None)  # idle again from here: closed 0.2 s later
    assert len(server.closed_at) == 1, server.closed_at
    assert server.closed_at[0] - began >= 0.28, "closed before its last idle time ran out"
