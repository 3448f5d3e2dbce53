"""Broadcast: one publisher, many listeners, never a blocked publisher.

Each listener gets its own bounded memory channel. Publishing is ``send_nowait`` to
each: a listener that falls behind loses events (counted per listener and in
total), the publisher — an actor's loop — is never held up by a slow reader.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

import attrs
import trio

T = TypeVar("T")


@attrs.define(eq=False)
class Subscription(Generic[T]):
    """One listener's end: iterate ``events``; ``dropped`` counts what it missed."""

    events: trio.MemoryReceiveChannel[T]
    _send: trio.MemorySendChannel[T]
    dropped: int = 0


class Broadcast(Generic[T]):
    """Fan-out of events to every current subscriber."""

    def __init__(self, buffer: int = 256) -> None:
        self._buffer = buffer
        self._subscribers: list[Subscription[T]] = []
        self.published = 0
        self.dropped = 0

    def publish(self, event: T) -> None:
        """Deliver ``event`` to every subscriber that has room."""
        self.published += 1
        for sub in self._subscribers:
            try:
                sub._send.send_nowait(event)
            except trio.WouldBlock:
                sub.dropped += 1
                self.dropped += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    @contextmanager
    def subscribe(self) -> Iterator[Subscription[T]]:
        """Listen for the duration of the ``with`` block."""
        send, receive = trio.open_memory_channel[T](self._buffer)
        sub = Subscription(receive, send)
        self._subscribers.append(sub)
        try:
            yield sub
        finally:
            self._subscribers.remove(sub)
            send.close()
            receive.close()

    @property
    def subscribers(self) -> int:
        """How many listen now."""
        return len(self._subscribers)
