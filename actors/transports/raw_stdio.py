"""A local server's pipes as raw JSON lines, for the WebSocket bridge's passthrough.

The bridge never speaks MCP to the processes it starts for its clients: what a client
sends is written as one line, and each line the server writes goes back as it is
(``actors/protocol/ndjson.py``'s ``LineSplitter``; nothing is decoded as JSON-RPC,
so ids, string or numeric, and fields we do not know pass untouched). Everything else
is the stdio transport's: the spawn with the parent-death signal, the pidfile, the
hub that drains stderr and sees the exit, and the process-group teardown, so a
bridged process dies like every local server (``open_stdio_transport(kind=RawStdio)``).
"""

from __future__ import annotations

import os

import trio

from actors.protocol.ndjson import LineSplitter
from actors.redaction import Redactor
from actors.spec import ServerSpec
from actors.transport_errors import TransportClosed
from actors.transports.stdio import _IO_ERRORS, StdioTransport


class RawStdio(StdioTransport):
    """One bridged server process; ``send`` / ``receive`` of messages are not used."""

    def __init__(self, spec: ServerSpec, process: trio.Process, redactor: Redactor) -> None:
        super().__init__(spec, process, redactor)
        self._lines = LineSplitter()

    def set_max_line_bytes(self, limit: int) -> None:
        """A server line longer than this fails ``receive_lines`` (FramingError)."""
        self._lines.max_line_bytes = limit

    async def send_line(self, line: bytes) -> None:
        """Write one line (a JSON text with no newline in it); TransportClosed when the
        server's stdin is closed."""
        await self.send_raw(line + b"\n")

    async def send_raw(self, data: bytes) -> None:
        """Write ``data`` as it is, waiting while the pipe is full; TransportClosed when
        the server's stdin is closed."""
        try:
            await self._stdin.send_all(data)
        except _IO_ERRORS as exc:
            raise self._stdin_closed() from exc

    def write_nowait(self, data: bytes) -> int:
        """Write what the pipe takes now, without waiting: how many bytes (0 when it is
        full). Only while no ``send_raw`` is under way (the caller orders them)."""
        try:
            assert isinstance(self._stdin, trio.lowlevel.FdStream)  # a pipe on every POSIX system
            return os.write(self._stdin.fileno(), data)  # trio made it non-blocking
        except BlockingIOError:
            return 0
        except OSError as exc:  # a closed pipe (EPIPE), or our end closed (EBADF)
            raise self._stdin_closed() from exc

    def _stdin_closed(self) -> TransportClosed:
        return TransportClosed(f"mcp server {self._name}: its stdin is closed{self._exit_note()}")

    async def receive_lines(self) -> list[bytes]:
        """The next complete lines (at least one), ``[]`` once the server is gone."""
        while True:
            data = await self._read_stdout()
            if not data:
                return []
            if lines := self._lines.feed(data):
                return lines

    def exit_note(self) -> str:
        """`` (process exited with status 1)``, or empty while it runs."""
        return self._exit_note()
