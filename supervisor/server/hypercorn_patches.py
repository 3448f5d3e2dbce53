"""Where ``serve`` needs what Hypercorn has no setting for: six wrapped private methods.

Each wrapper changes nothing for a server whose config is not a ``ServeConfig``: an
embedding host that runs its own Hypercorn in the same process keeps Hypercorn's
behaviour. ``install_all`` installs them once per process. They name private
attributes, so ``PATCHED`` lists them and a test (``tests/server/``) asserts that
each exists in the Hypercorn installed; an upgrade that renames one fails that test
loudly, and ``pyproject.toml`` pins Hypercorn to the minor range the tests ran on.

- **JSON refusals** (``H11Protocol._send_error_response``): a request h11 cannot
  parse (a NUL in a header such as ``Authorization: Bearer a\\0b``, a bare CR, a
  malformed request line, headers over the size limit) never reaches an app: Hypercorn
  answers it itself, with a bodiless 400, 431 or 501. Ours answer JSON, like every
  other refusal. A wrapper, not a proxy in front: the alternative is parsing HTTP twice.
- **Pings that end with their socket** (``WSStream._send_pings``): Hypercorn pings
  every ``websocket_ping_interval`` seconds (the bridge's heartbeats,
  ``bridge.heartbeat_s``) from a task that sleeps the whole interval before it looks
  whether its socket closed; the server's drain waits for that task, so a socket closed
  just before a shutdown held the drain for the whole graceful timeout. Ours wake every
  ``TICK_S`` to look.
- **No permessage-deflate** (``WSStream._accept``): Hypercorn accepts it whenever a
  client offers it (browsers always do), and its zlib runs in the event loop for every
  frame both ways: measured on ``/v1/bridge``, 50 to 95 µs more per round trip at p50
  (``benchmarks/RESULTS.md``, the bridge's round 3), and a 4 MiB frame would hold
  every other socket while it is compressed. Bridge frames are small JSON on a LAN or
  loopback, where latency is what counts; ours answer as if none were offered.
- **A sized answer in one write** (``H11Protocol._send_h11_event``): Hypercorn writes
  each h11 event to the socket as it comes, so an answer with a ``Content-Length`` took
  three writes (its head, its body, and an empty end), each under the connection's
  send lock in a shielded scope, two of them a ``sendto``. Ours hold such a head until
  the next event of the connection and write them together, and write nothing for an
  event with no bytes: the same bytes on the wire, one write and one ``sendto`` per
  ``/mcp`` JSON answer (``benchmarks/RESULTS.md``, "Issue 37: the gateway's requests
  per core"). A stream (no length) is written as before, its head at once.
- **One keep-alive timer a connection** (``TCPServer.__init__``, ``TCPServer._read_data``):
  Hypercorn times an idle keep-alive connection with a task it cancels when a request
  arrives and starts again (under a lock, with ``nursery.start``) when its answer is
  sent: two tasks' worth of scheduling, a ``Cancelled`` and two lock round trips per
  request. Ours keep one task a connection whose deadline moves (``IdleTimer``): the
  same closing, after ``keep_alive_timeout`` idle or at once on shutdown if idle.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import h11
import orjson
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.events import RawData
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.protocol.ws_stream import WSStream
from hypercorn.trio.tcp_server import TCPServer
from wsproto.connection import ConnectionState
from wsproto.events import Ping

from actors.log_events import get_logger
from supervisor.web.routes import JSON

log = get_logger("supervisor.admin")

TICK_S = 0.5
PATCHED: tuple[tuple[type, str], ...] = (
    (H11Protocol, "_send_error_response"),
    (WSStream, "_send_pings"),
    (WSStream, "_accept"),
    (H11Protocol, "_send_h11_event"),
    (TCPServer, "__init__"),
    (TCPServer, "_read_data"),
)
"""Every private attribute of Hypercorn's that ``install_all`` wraps."""
_MARK = "_mcp_supervisor_patch"
_REFUSALS = {
    400: (
        "bad_request",
        "the request is not valid HTTP/1.1: a malformed request line, or a header holding a "
        "character HTTP does not allow (such as NUL, or CR outside a line end)",
    ),
    431: ("too_large", "the request line and headers are too large"),
    501: ("not_implemented", "the request's transfer coding is not supported; send a Content-Length"),
}


class ServeConfig(HypercornConfig):
    """Hypercorn settings of ``serve``: marks the servers the wrappers apply to."""


def refusal_body(status: int) -> bytes:
    """The JSON error body of a refusal Hypercorn makes before any app runs."""
    code, message = _REFUSALS.get(status, ("bad_request", "the request is not valid HTTP/1.1"))
    return orjson.dumps({"error": {"code": code, "message": message}})


def _json_refusals(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    async def send_error_response(self: Any, status_code: int) -> None:
        if not isinstance(self.config, ServeConfig):
            await original(self, status_code)
            return
        body = refusal_body(status_code)
        headers = [
            (b"content-type", JSON.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *self.config.response_headers("h11"),
        ]
        await self._send_h11_event(h11.Response(status_code=status_code, headers=headers))
        await self._send_h11_event(h11.Data(data=body))
        await self._send_h11_event(h11.EndOfMessage())

    return send_error_response


def _pings_end(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    def open_(stream: Any) -> bool:
        return not stream.closed and stream.connection.state is ConnectionState.OPEN

    async def send_pings(self: Any) -> None:
        if not isinstance(self.config, ServeConfig):
            await original(self)
            return
        interval: float = self.config.websocket_ping_interval or 0.0
        while open_(self):
            await self._send_wsproto_event(Ping())
            waited = 0.0
            while waited < interval and open_(self):
                step = min(TICK_S, interval - waited)
                await self.context.sleep(step)
                waited += step

    return send_pings


def _no_deflate(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    async def accept(self: Any, message: Any) -> None:
        if isinstance(self.config, ServeConfig):
            self.handshake.extensions = None  # as if none were offered
        await original(self, message)

    return accept


_HELD = "_mcp_supervisor_held_head"
"""Where a sized answer's head waits for its body (an attribute of the H11Protocol)."""


def _sized(event: object) -> bool:
    """An answer's head that says its length: its body follows with no wait."""
    return (
        type(event) is h11.Response
        and any(name == b"content-length" for name, _ in event.headers)  # h11 lowers names
    )


def _one_write(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    async def send_h11_event(self: Any, event: Any) -> None:
        if not isinstance(self.config, ServeConfig):
            await original(self, event)
            return
        try:
            data = self.connection.send(event)
        except h11.LocalProtocolError:
            if self.connection.their_state != h11.ERROR:
                raise
            return
        held: bytes = self.__dict__.pop(_HELD, b"")
        if _sized(event):
            setattr(self, _HELD, held + data)
            return
        data = held + data
        if data:
            await self.send(RawData(data=data))

    return send_h11_event


class IdleTimer:
    """Hypercorn's idle task of one connection (``restart`` when it goes idle, ``stop``
    when a request comes) as one task whose deadline moves: a connection idle for
    ``keep_alive_timeout``, or idle when the server shuts down, is closed as
    Hypercorn's own ``_idle_timeout`` closes it."""

    def __init__(self, server: Any) -> None:
        self._server = server
        self._scope: trio.CancelScope | None = None
        self._deadline = math.inf
        self._idle = False
        self._reading = True
        self._watching = False

    async def restart(self, task_group: Any, action: Any) -> None:
        """Idle from now (``action``: Hypercorn's ``_idle_timeout``, which ``_watch`` is)."""
        self._idle = True
        terminated = self._server.context.terminated.is_set()
        self._move(-math.inf if terminated else trio.current_time() + self._server.config.keep_alive_timeout)
        if not self._watching:  # one task, even before it first runs
            self._watching = True
            task_group._nursery.start_soon(self._watch)

    async def stop(self) -> None:
        """Busy: no timeout until the next ``restart``."""
        self._idle = False
        self._move(math.inf)

    def reading_ended(self) -> None:
        """The connection reads no more: a busy one's timer ends (an idle one's runs out,
        as Hypercorn's does)."""
        self._reading = False
        if not self._idle:
            self._move(-math.inf)

    def _move(self, deadline: float) -> None:
        self._deadline = deadline
        if self._scope is not None:
            self._scope.deadline = deadline

    async def _watch(self) -> None:
        try:
            if await self._idle_out():
                with trio.CancelScope(shield=True):
                    await self._server._initiate_server_close()
        finally:
            self._scope, self._watching = None, False

    async def _idle_out(self) -> bool:
        """Until the connection has been idle for its timeout, or is idle at shutdown
        (True), or reads no more while busy (False)."""
        terminated = self._server.context.terminated
        while True:
            with trio.CancelScope(deadline=self._deadline) as self._scope:
                if terminated.is_set():
                    await trio.sleep_forever()  # until idle (``restart`` moves the deadline)
                else:
                    await terminated.wait()
            if self._idle:
                return True
            if not self._reading:
                return False
            self._deadline = math.inf  # shut down while busy: closed once idle


def _one_timer(original: Callable[..., None]) -> Callable[..., None]:
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if isinstance(self.config, ServeConfig):
            self.idle_task = IdleTimer(self)

    return init


def _timer_ends(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    async def read_data(self: Any) -> None:
        try:
            await original(self)
        finally:
            if isinstance(self.idle_task, IdleTimer):
                self.idle_task.reading_ended()

    return read_data


_WRAPPERS: dict[str, Callable[[Any], Any]] = {
    "_send_error_response": _json_refusals,
    "_send_pings": _pings_end,
    "_accept": _no_deflate,
    "_send_h11_event": _one_write,
    "__init__": _one_timer,
    "_read_data": _timer_ends,
}


def install_all() -> None:
    """Install every wrapper (idempotent). One whose method is missing is skipped with
    a warning naming it: ``serve`` still runs, with Hypercorn's own behaviour there."""
    for owner, name in PATCHED:
        original = getattr(owner, name, None)
        if original is None:
            log.warning(
                "hypercorn has changed",
                extra={
                    "fields": {"missing": f"{owner.__name__}.{name}", "fix": "install the pinned hypercorn"}
                },
            )
            continue
        if getattr(original, _MARK, False):
            continue
        wrapper = _WRAPPERS[name](original)
        setattr(wrapper, _MARK, True)
        setattr(owner, name, wrapper)
