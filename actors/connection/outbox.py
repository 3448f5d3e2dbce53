"""What a connection actor publishes to the router: in order, and without waiting.

The state machine's effects are carried out at once by whichever task reported the
event (the mailbox loop, the reader, the lifecycle), and none of them may wait on the
router. A message goes straight into the router's mailbox when there is room and
nothing older is waiting; otherwise it is kept, in order, and a flusher task, started
only then, delivers it, giving each message at most ``PUBLISH_TIMEOUT_S``: a router
that is gone or stuck can never hold an actor (or its teardown) hostage.
"""

from __future__ import annotations

import contextlib

import trio

from actors.connection.messages import Published

PUBLISH_TIMEOUT_S = 5.0


class Outbox:
    """The actor's ordered way to the router's mailbox."""

    __slots__ = ("_backlog", "_channel", "_flushed", "_flushing", "_nursery")

    def __init__(self, channel: trio.MemorySendChannel[Published], nursery: trio.Nursery) -> None:
        self._channel = channel
        self._nursery = nursery
        self._backlog: list[Published] = []
        self._flushing = False
        self._flushed: trio.Event | None = None

    def put(self, message: Published) -> None:
        """Publish ``message`` after everything put before it."""
        if not self._backlog:
            try:
                self._channel.send_nowait(message)
                return
            except trio.WouldBlock:
                pass
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the router is gone: nobody to tell
        self._backlog.append(message)
        if not self._flushing:
            self._flushing = True
            self._nursery.start_soon(self._flush)

    async def _flush(self) -> None:
        try:
            while self._backlog:
                with (
                    contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError),
                    trio.move_on_after(PUBLISH_TIMEOUT_S),
                ):
                    await self._channel.send(self._backlog[0])
                del self._backlog[0]
        finally:
            self._flushing = False
            if self._flushed is not None:
                self._flushed.set()
                self._flushed = None

    async def drain(self) -> None:
        """Wait until everything put so far has been delivered (or timed out)."""
        while self._flushing:
            if self._flushed is None:
                self._flushed = trio.Event()
            await self._flushed.wait()
