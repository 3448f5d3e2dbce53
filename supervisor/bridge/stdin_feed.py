"""A bridge session's lines to its process's stdin, without the socket's reader waiting.

One reader serves every session of a socket (a client's on the hub; every client's on
a dial-out peer), so it must never wait for one process to read. ``offer`` writes what
the pipe takes at once, in the reader's own task (the usual case: no task hop on the
round trip's path); what the pipe cannot take waits here, in order, for the session's
feeder task (``run``), and everything offered after it queues behind it. A process that
lets more than ``STDIN_BUFFER_BYTES`` pile up (it stopped reading its stdin) is too slow:
``offer`` says so and the caller closes that one session (``SERVER_NOT_READING``), the
mirror of the hub cutting off a client too slow to read (``link.py``, 4429).
"""

from __future__ import annotations

from collections import deque

import trio

from actors.transports.raw_stdio import RawStdio

STDIN_BUFFER_BYTES = 8 * 1024 * 1024  # unwritten input of one session's process
SERVER_NOT_READING = "server_not_reading"


class StdinFeed:
    """The input side of one session's process; ``run`` is the session's feeder task."""

    def __init__(self, child: RawStdio) -> None:
        self._child = child
        self._waiting: deque[bytes] = deque()  # the head is being written by ``run``
        self.waiting_bytes = 0
        self._more = trio.Event()

    def offer(self, line: bytes) -> bool:
        """Write one line now or queue it; False (nothing queued) when the process has
        more than ``STDIN_BUFFER_BYTES`` unread. TransportClosed when its stdin is closed."""
        data = line + b"\n"
        if not self._waiting:
            written = self._child.write_nowait(data)
            if written == len(data):
                return True
            data = data[written:]
        elif self.waiting_bytes + len(data) > STDIN_BUFFER_BYTES:
            return False
        self._waiting.append(data)
        self.waiting_bytes += len(data)
        self._more.set()
        return True

    async def run(self) -> None:
        """Write what waits, in order, until cancelled (the session's end) or the
        process's stdin closes (TransportClosed)."""
        while True:
            await self._more.wait()
            self._more = trio.Event()
            while self._waiting:
                data = self._waiting[0]
                await self._child.send_raw(data)
                self._waiting.popleft()
                self.waiting_bytes -= len(data)
