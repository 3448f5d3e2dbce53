"""Mailboxes: memory channels with one owner, and request/reply with a reply channel.

An actor owns the receive end of its mailbox. A request carries its own reply channel
of size 1, so the actor can answer without ever blocking, and the answer is sent
exactly once (``answer`` refuses a second one loudly: that would be our bug).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeAlias, TypeVar

import trio

T = TypeVar("T")

DEFAULT_MAILBOX_SIZE = 256

Channels: TypeAlias = tuple[trio.MemorySendChannel[T], trio.MemoryReceiveChannel[T]]


def open_mailbox(size: int = DEFAULT_MAILBOX_SIZE) -> Channels[Any]:
    """A bounded mailbox: senders wait when the actor falls behind (honest backpressure).

    Annotate the result (``pair: Channels[Message] = open_mailbox()``) to type it.
    """
    return trio.open_memory_channel[Any](size)


def answer(reply: trio.MemorySendChannel[T], value: T) -> bool:
    """Deliver the one answer; False when the asker has gone away (that is fine)."""
    try:
        reply.send_nowait(value)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return False
    except trio.WouldBlock:
        raise RuntimeError("a request was answered twice") from None
    return True


def queued(mailbox: trio.MemoryReceiveChannel[T]) -> Iterator[T]:
    """What is already waiting in ``mailbox``, taken without waiting; ends once it is
    empty (or closed). An actor takes all of it before it yields, so what arrived
    together is handled together (one write, one epoch, one transaction)."""
    while True:
        try:
            yield mailbox.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            return


def try_send(channel: trio.MemorySendChannel[T], message: T) -> bool:
    """Send without waiting; False when the mailbox is full or gone.

    For notices that may be lost without harm (progress, best-effort stop requests,
    cancellation hints); never for a reply, which must arrive.
    """
    try:
        channel.send_nowait(message)
    except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
        return False
    return True
