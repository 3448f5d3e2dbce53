"""The floor: the least a Trio + orjson JSON-RPC client over a pipe can do per call.

No validation, no policy, no audit, no state machine: a dict of waiters keyed by
request id, one writer task that joins whatever was queued into one write (concurrent
callers may not share ``send_all``), one reader task that splits lines and wakes the
waiter. When the server dies, every waiter is answered at once (so the kill benchmark
can time the floor too). Everything our supervisor adds is measured against this.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Any

import orjson
import trio


class ConnectionLost(Exception):
    """The server went away while a request waited."""


class FloorClient:
    """One JSON-RPC connection to a server process."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._next_id = 0
        self._waiters: dict[int, list[Any]] = {}
        self._outbox: list[bytes] = []
        self._wake = trio.Event()
        self._closed = False

    @classmethod
    async def spawn(cls, argv: Sequence[str], nursery: trio.Nursery) -> FloorClient:
        """Start the server and the client's two tasks in ``nursery``."""
        process = await trio.lowlevel.open_process(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        client = cls(process)
        nursery.start_soon(client._writer)
        nursery.start_soon(client._reader)
        return client

    async def handshake(self) -> None:
        """initialize, notifications/initialized, tools/list."""
        await self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "floor", "version": "0"},
            },
        )
        self._outbox.append(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        await self.request("tools/list", {})

    async def request(self, method: str, params: Any) -> Any:
        """Send one request and wait for its result (ConnectionLost if the server dies)."""
        if self._closed:
            raise ConnectionLost("closed")
        rid = self._next_id
        self._next_id = rid + 1
        slot: list[Any] = [trio.Event(), None]
        self._waiters[rid] = slot
        self._outbox.append(
            orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + b"\n"
        )
        self._wake.set()
        await slot[0].wait()
        message = slot[1]
        if message is None:
            raise ConnectionLost("server closed the connection")
        return message.get("result")

    async def call(self, tool: str, arguments: Any) -> Any:
        return await self.request("tools/call", {"name": tool, "arguments": arguments})

    async def _writer(self) -> None:
        stdin = self._stdin
        try:
            while True:
                if not self._outbox:
                    self._wake = trio.Event()
                    await self._wake.wait()
                    continue
                data = b"".join(self._outbox)
                self._outbox.clear()
                await stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self._lose()

    async def _reader(self) -> None:
        stdout = self._stdout
        waiters = self._waiters
        pending = b""
        try:
            while True:
                chunk = await stdout.receive_some(262144)
                if not chunk:
                    break
                if b"\n" not in chunk:
                    pending += chunk
                    continue
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    message = orjson.loads(line)
                    slot = waiters.pop(message.get("id"), None)
                    if slot is not None:
                        slot[1] = message
                        slot[0].set()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        self._lose()

    def _lose(self) -> None:
        self._closed = True
        waiters, self._waiters = self._waiters, {}
        for slot in waiters.values():
            slot[0].set()  # slot[1] stays None: ConnectionLost

    async def aclose(self) -> None:
        """Close stdin (the polite goodbye) and reap the process."""
        with trio.CancelScope(shield=True):
            await self._stdin.aclose()
            with trio.move_on_after(2):
                await self.process.wait()
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
