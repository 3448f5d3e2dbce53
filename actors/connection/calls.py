"""The in-flight call table: who waits for which request id, and until when.

Pure bookkeeping, no I/O: the actor registers a call when it sends it, finds it when
an answer or progress arrives, and asks which calls are past their deadline. A call
has a sliding deadline (``call_timeout`` after the last sign of life: the send or a
progress notification) and an absolute cap (``max_call``) that progress cannot move.

A call of the per-request era may be answered "input required" (``rounds.py``): while
the host's handler answers, its entry waits off the wire (``park``), on no sliding
deadline, still found by its reply channel; the retry puts it back (``resume``) under a
new request id, with a fresh sliding deadline and the same cap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import attrs
import trio

from actors.connection.messages import CallFailed, CallOutcome, CallTool, unavailable
from actors.connection.vocabulary import Why
from actors.mailbox import answer, queued
from actors.protocol.era import Era
from actors.protocol.messages import (
    INVALID_REQUEST,
    LATEST_MODERN_VERSION,
    LATEST_PROTOCOL_VERSION,
    ErrorObject,
    RequestId,
)


@attrs.define(slots=True, eq=False)
class InFlight:
    """One sent ``tools/call`` awaiting its answer."""

    request_id: RequestId
    call: CallTool
    sent_at: float
    deadline: float
    hard_deadline: float
    timeout_s: float  # the sliding part: each sign of life moves the deadline this far
    max_s: float  # the cap, from the send
    rounds: int = 0  # input-required answers so far (multi round-trip requests)
    scope: trio.CancelScope | None = None  # the host's handler at work for it, if any


class InFlightTable:
    """Calls by request id, and by their reply channel (for cancellation)."""

    __slots__ = ("_by_id", "_by_reply", "_waiting", "call_timeout_s", "max_call_s")

    def __init__(self, call_timeout_s: float, max_call_s: float) -> None:
        self.call_timeout_s = call_timeout_s
        self.max_call_s = max_call_s
        self._by_id: dict[RequestId, InFlight] = {}
        self._by_reply: dict[trio.MemorySendChannel[CallOutcome], InFlight] = {}
        self._waiting: dict[trio.MemorySendChannel[CallOutcome], InFlight] = {}

    def __len__(self) -> int:
        return len(self._by_id) + len(self._waiting)

    def __iter__(self) -> Iterator[InFlight]:
        return iter(list(self._by_id.values()))

    def add(self, request_id: RequestId, call: CallTool, now: float) -> InFlight:
        """Register a sent call; returns its entry with both deadlines set."""
        timeout_s, max_s = call.timeouts or (self.call_timeout_s, self.max_call_s)
        hard = now + max_s
        entry = InFlight(request_id, call, now, min(now + timeout_s, hard), hard, timeout_s, max_s)
        self._by_id[request_id] = entry
        self._by_reply[call.reply] = entry
        return entry

    def get(self, request_id: RequestId) -> InFlight | None:
        """The call waiting for ``request_id``, if any."""
        return self._by_id.get(request_id)

    def by_reply(self, reply: trio.MemorySendChannel[CallOutcome]) -> InFlight | None:
        """The call whose caller holds ``reply`` (sent, or waiting between rounds)."""
        return self._by_reply.get(reply) or self._waiting.get(reply)

    def park(self, entry: InFlight) -> None:
        """A popped call waits for the host's input, off the wire (no sliding deadline)."""
        self._waiting[entry.call.reply] = entry

    def unpark(self, entry: InFlight) -> bool:
        """Take a waiting call back; False when it was answered meanwhile (cancelled,
        or the connection died), and must be neither answered nor retried."""
        return self._waiting.pop(entry.call.reply, None) is entry

    def resume(self, entry: InFlight, request_id: RequestId, now: float) -> None:
        """The call's retry was sent as ``request_id``: a fresh sliding deadline (the
        time the host took is not counted), the cap unchanged."""
        entry.request_id = request_id
        entry.deadline = min(now + entry.timeout_s, entry.hard_deadline)
        self._by_id[request_id] = entry
        self._by_reply[entry.call.reply] = entry

    def pop(self, request_id: RequestId) -> InFlight | None:
        """Remove and return a call (it is about to be answered)."""
        entry = self._by_id.pop(request_id, None)
        if entry is not None:
            del self._by_reply[entry.call.reply]
        return entry

    def touch(self, request_id: RequestId, now: float) -> None:
        """Progress arrived: slide the deadline, never past the absolute cap."""
        entry = self._by_id.get(request_id)
        if entry is not None:
            entry.deadline = min(now + entry.timeout_s, entry.hard_deadline)

    def next_deadline(self) -> float:
        """The earliest deadline, or +inf when nothing is in flight."""
        return min((e.deadline for e in self._by_id.values()), default=math.inf)

    def expired(self, now: float) -> list[InFlight]:
        """Remove and return every call whose deadline has passed."""
        due = [e for e in self._by_id.values() if e.deadline <= now]
        for entry in due:
            self.pop(entry.request_id)
        return due

    def drain(self) -> list[InFlight]:
        """Remove and return everything (the connection died); a host handler still at
        work for a call is stopped."""
        entries = [*self._by_id.values(), *self._waiting.values()]
        for entry in self._waiting.values():
            if entry.scope is not None:
                entry.scope.cancel()
        self._by_id.clear()
        self._by_reply.clear()
        self._waiting.clear()
        return entries


BUSY_RETRY_AFTER_MS = 250
"""What a ``busy`` answer suggests waiting: fixed, short. Recent call durations would be
a guess too (one slow call says little about when the next slot frees), and a caller
that retries early is answered ``busy`` again at once, at no cost to the server."""


def busy(limit: int | None, in_flight: int, server: str) -> CallFailed | None:
    """The answer to a call beyond the server's ``concurrency`` (``limit`` requests are
    already in flight to this instance), or None when it may go. Never a wait: a caller
    that queued silently behind a slow call could not tell it from a hung server."""
    if limit is None or in_flight < limit:
        return None
    return CallFailed(
        "busy",
        f"mcp server {server} is busy: {in_flight} calls in flight, its concurrency limit is "
        f"{limit}; retry in {BUSY_RETRY_AFTER_MS} ms",
        BUSY_RETRY_AFTER_MS,
    )


def call_failure(why: Why, tool: str, server: str) -> CallFailed:
    """The answer to a call the machine fails (``FailCalls``), by why."""
    if why is Why.STOPPED_RESPONDING:
        return CallFailed("unavailable", f"MCP server stopped responding during tools/call {tool}")
    if why is Why.AUTH_FAILED:  # the model sees the sanitized text, never the server's 401 body
        return CallFailed("auth_failed", "authentication failed")
    if why is Why.CANCELLED:
        return CallFailed("cancelled", f"call cancelled: mcp server {server} stopped")
    return unavailable(server)


def close_mailbox(mailbox: trio.MemoryReceiveChannel[Any], server: str) -> None:
    """A connection's final stop: refuse the calls still queued, then close the
    mailbox so that senders fail fast."""
    for message in queued(mailbox):
        if isinstance(message, CallTool):
            answer(message.reply, unavailable(server))
    mailbox.close()


def call_params(call: CallTool) -> dict[str, Any]:
    """A call's params: a tool's name and arguments; any other request's as given."""
    if call.method != "tools/call":
        return dict(call.arguments)
    return {"name": call.tool, "arguments": dict(call.arguments)}


def describe(call: CallTool) -> str:
    """A call in messages: ``tools/call echo``, ``prompts/get greeting``."""
    return f"{call.method} {call.tool}"


# How the official SDK refuses a request of its own that a 2026-07-28 connection cannot
# carry (NoBackChannelError: -32600, "Cannot send 'sampling/createMessage': …").
_NO_BACK_CHANNEL = re.compile(r"""^Cannot send ['"]([\w/]+)['"]""")


def server_error(server: str, call: CallTool, error: ErrorObject, era: Era | None) -> CallFailed:
    """The answer to a call the server answered with a JSON-RPC error (``error`` already
    redacted). A server of the per-request era that refused to send a request of its own
    mid-call (a tool written for the handshake era) is told as that, with the fix."""
    said = f"mcp server {server} answered {describe(call)} with error {error.code}: {error.message}"
    asked = _NO_BACK_CHANNEL.match(error.message) if error.code == INVALID_REQUEST else None
    if asked is not None and era is Era.PER_REQUEST:
        said = (
            f"mcp server {server} asked for {asked[1]} during {describe(call)} the handshake-era "
            f"way (a request of its own mid-call), which protocol {LATEST_MODERN_VERSION} cannot "
            f'carry; set "protocol": "{LATEST_PROTOCOL_VERSION}" for server {server} (its answer: '
            f"error {error.code}: {error.message})"
        )
    return CallFailed("server_error", said, rpc_error=error)
