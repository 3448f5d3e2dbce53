"""The SSE streams of one gateway session: numbered events, kept for resumption.

Every stream of a Streamable HTTP session is an ``EventStream``: the standalone one
(``GET /mcp``, for messages no request caused) and one per POSTed request answered
as ``text/event-stream`` (its progress, its server requests, then its response).
Each event gets an id ``<stream>-<n>``, unique in the session, and is kept in a
bounded buffer, so a client that lost a stream reconnects with ``GET /mcp`` and
``Last-Event-ID`` and gets what it missed, on that stream only, then the rest live.

Every SSE answer begins with a priming event: an id, a ``retry:`` field (how long
a client waits before reconnecting) and no data, so a client has an id to resume
from before the first message arrives.

A message is sent on one stream only: the standalone stream serves one ``GET`` at a
time (a newer one takes over, as a client reconnecting has lost the old), and keeps
what it publishes while no GET is open (bounded), for the next one.

``follow`` is the response body, an async generator: Trio forbids a ``yield`` inside
a cancel scope, so every wait ends before the generator yields.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

import orjson
import trio

KEEP_EVENTS = 256
"""Events kept per stream for resumption (older ones are gone: a client that missed
more than this reconnects without them)."""
RETRY_MS = 1000
HEARTBEAT_S = 1.0
"""A comment this often on a quiet stream: Hypercorn notices a departed HTTP/1.1
client only when a write fails."""


def frame(event_id: str, message: Mapping[str, Any]) -> bytes:
    """One SSE event carrying one JSON-RPC message."""
    return b"id: " + event_id.encode() + b"\nevent: message\ndata: " + orjson.dumps(message) + b"\n\n"


def priming(event_id: str) -> bytes:
    """The first event of every SSE answer: an id to resume from, the retry delay, no data."""
    return b"id: " + event_id.encode() + b"\nretry: " + str(RETRY_MS).encode() + b"\ndata: \n\n"


def parse_event_id(text: str) -> tuple[str, int] | None:
    """``<stream>-<n>`` → (stream, n); None when it is not one of ours."""
    stream, sep, number = text.rpartition("-")
    if not sep or not stream or not number.isdigit() or len(number) > 18:
        return None
    return stream, int(number)


Scrub = Callable[[Any], Any]
"""Masks the config's secret values in a message (the admin app's ``SecretScrubber``)."""


def _as_is(message: Any) -> Any:
    return message


class EventStream:
    """One SSE stream of a session (see the module docstring)."""

    def __init__(self, stream_id: str, *, keep: int = KEEP_EVENTS, scrub: Scrub = _as_is) -> None:
        self.id = stream_id
        self._scrub = scrub
        self._events: deque[tuple[int, bytes]] = deque(maxlen=keep)
        self._numbers = itertools.count(1)
        self.last = 0
        """The number of the newest event (0: none yet)."""
        self.finished = False
        self.response: Mapping[str, Any] | None = None
        """The response that finished it, if one did."""
        self.cancelled = False
        """Its request was cancelled by the client: it ended without a response."""
        self.related = 0
        """Messages sent on it besides a response (progress, server requests, notices)."""
        self._changed = trio.Event()
        self._follower = 0
        self.delivered = 0
        """The newest event number some follower has yielded."""

    def publish(self, message: Mapping[str, Any], *, response: bool = False) -> int:
        """Add one message; its event number. A response finishes the stream."""
        number = next(self._numbers)
        self._events.append((number, frame(f"{self.id}-{number}", self._scrub(message))))
        self.last = number
        if response:
            self.finished = True
            self.response = message
        else:
            self.related += 1
        self._wake()
        return number

    def finish(self) -> None:
        """No more events: followers end once they have sent what is kept."""
        self.finished = True
        self._wake()

    def end_cancelled(self) -> None:
        """The client cancelled the stream's request: it ends without a response."""
        self.cancelled = True
        self.finish()

    def after(self, number: int) -> list[tuple[int, bytes]]:
        """The kept events numbered above ``number``, oldest first."""
        return [(n, data) for n, data in self._events if n > number]

    async def changed(self, seen: int) -> None:
        """Wait until there is an event above ``seen`` or the stream finished."""
        await self._wait(seen, None)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def take_over(self) -> int:
        """A new follower's token; every older follower ends at its next wake-up."""
        self._follower += 1
        self._wake()
        return self._follower

    async def follow(self, after: int, token: int | None = None) -> AsyncGenerator[bytes, None]:
        """The SSE body: a priming event, the kept events above ``after``, then new
        ones as they come, until the stream finishes (or, with ``token``, until a
        newer follower takes over)."""
        yield priming(f"{self.id}-{after}")
        seen = after
        while token is None or token == self._follower:
            for number, data in self.after(seen):
                seen = number
                self.delivered = max(self.delivered, number)  # a client that lost it resumes by id
                yield data
            if self.finished and self.last <= seen:
                return
            woke = False
            with trio.move_on_after(HEARTBEAT_S):
                await self._wait(seen, token)
                woke = True
            if not woke:
                yield b": keepalive\n\n"

    async def _wait(self, seen: int, token: int | None) -> None:
        while self.last <= seen and not self.finished and (token is None or token == self._follower):
            await self._changed.wait()


class StreamOutlet:
    """An ``Outlet`` (``outlet.py``) that publishes on one ``EventStream``."""

    def __init__(self, stream: EventStream) -> None:
        self.stream = stream

    async def send(self, message: Mapping[str, Any]) -> None:
        self.stream.publish(message)
