"""Reading a server's pipe: leaner than trio's ``FdStream.receive_some``, and able to
end when the writer dies even though the pipe stays open."""

from __future__ import annotations

import os

import trio


class WriterGone:
    """Tells a pipe reader that the writer it cares about has exited.

    EOF on a pipe comes only when *every* process holding its write end has closed it.
    A server's daemonized grandchild may keep its stdout open forever, so the server's
    own exit (seen through its pidfd) must end the read: after :meth:`set`, a wait is
    woken and an empty pipe reads as EOF; what the server wrote before it died is still
    read first.
    """

    __slots__ = ("_fd", "is_set")

    def __init__(self) -> None:
        self.is_set = False
        self._fd = -1  # the pipe a reader waits on now (-1: none)

    def set(self) -> None:
        self.is_set = True
        if self._fd >= 0:  # wake the waiting reader (it reads what is left, then EOF)
            fd, self._fd = self._fd, -1
            trio.lowlevel.notify_closing(fd)

    async def wait_readable(self, fd: int) -> None:
        """Wait until ``fd`` is readable or the writer is gone.

        Woken by ``notify_closing`` (the pipe is not closed: the next wait registers it
        again), not by cancelling a scope of its own: a cancel scope per wait cost about
        15 of Trio's functions on every answer (``benchmarks/call_counts.py``)."""
        if self.is_set:
            return
        self._fd = fd
        try:
            await trio.lowlevel.wait_readable(fd)
        except trio.ClosedResourceError:
            if not self.is_set:  # the pipe itself is being closed
                raise
        finally:
            self._fd = -1


async def read_some(
    stream: trio.abc.ReceiveStream, max_bytes: int, writer_gone: WriterGone | None = None
) -> bytes | bytearray:
    """``stream.receive_some`` for a pipe, leaner: read first, wait only when empty.

    trio's ``FdStream.receive_some`` yields before every read and waits for the pipe
    inside its ``except BlockingIOError`` block, which keeps that exception and its
    traceback alive as long as the pipe is quiet (tracemalloc: ~0.35 KB per idle reader).
    Here a read that found data yields after it (every call is a
    checkpoint, so a busy pipe cannot starve other tasks), and a read that waited does
    not yield again: one scheduling round less per answer. With ``writer_gone`` set,
    an empty pipe is the end (``b""``).
    """
    if not isinstance(stream, trio.lowlevel.FdStream):
        return await stream.receive_some(max_bytes)
    waited = False
    while True:
        fd = stream.fileno()  # -1 once closed: never read a reused descriptor
        if fd < 0:
            raise trio.ClosedResourceError("the pipe was already closed")
        try:
            data: bytes | None = os.read(fd, max_bytes)
        except BlockingIOError:
            data = None
        except OSError as exc:
            raise trio.BrokenResourceError(f"cannot read the pipe: {exc}") from exc
        if data is not None:
            if not waited:
                await trio.lowlevel.checkpoint()
            return data
        if writer_gone is None:
            await trio.lowlevel.wait_readable(fd)
        elif writer_gone.is_set:
            return b""
        else:
            await writer_gone.wait_readable(fd)
        waited = True
