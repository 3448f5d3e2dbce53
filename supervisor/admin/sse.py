"""Server-sent event streams: the live event feed and one call's progress.

Both are async generators that Quart sends as the response body. Trio forbids a
``yield`` inside a cancel scope or nursery (the consumer would run inside our
scope), so every wait with a timeout finishes before the generator yields, and the
call itself runs in a task of ``HostedSessions``; the generator only reads what
that task produces, and cancels it if the client goes away first. Hypercorn learns
that an HTTP/1.1 client left only when a write fails, so a quiet call stream writes
a comment every second; the event feed, every 15 s.

Call stream order is a contract (hosts read it to tie progress to a call; the README
and the OpenAPI document promise it, test_admin_contract checks it): ``request_received``
first, ``progress`` for each notification, ``result`` (the envelope), ``done`` last —
also when the call fails, and also when the call task dies or is cancelled, which
yields a failure envelope instead of breaking the stream.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

import attrs
import orjson
import trio

from actors.broadcast import Broadcast, Subscription
from actors.log_events import get_logger
from actors.protocol.session import ProgressReceived
from actors.router.envelope import Envelope, failure
from supervisor.admin.traced import CallArrival, traced
from supervisor.admin.views import progress_item
from supervisor.calls.requests import RequestInFlight
from supervisor.calls.turns import Turn

log = get_logger("supervisor.admin")

HEARTBEAT_S = 15.0
CALL_HEARTBEAT_S = 1.0
ABANDON_GRACE_S = 2.0
PROGRESS_BUFFER = 64
GLOBAL_EVENTS = frozenset({"state", "epoch"})
OPERATOR_EVENTS = frozenset({"replica_config_differs"})
"""Events about the service itself, no tenant's: the operator's stream carries them."""

Scrub = Callable[[Any], Any]


def frame(event: str, data: Any, scrub: Scrub) -> bytes:
    """One SSE frame: ``event: <name>`` and one ``data:`` line of JSON."""
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(scrub(data)) + b"\n\n"


def event_data(event: Mapping[str, Any], tenant: str | None) -> dict[str, Any]:
    """An event's fields as ``tenant`` is sent them: an ``epoch`` event's count of every
    server's tools is the operator's alone (a tenant's exposure lists may hide some)."""
    if tenant is not None and event.get("type") == "epoch":
        return {k: v for k, v in event.items() if k not in ("type", "tools")}
    return {k: v for k, v in event.items() if k != "type"}


def visible_to(event: Mapping[str, Any], tenant: str | None) -> bool:
    """State and epoch events are everyone's; an event naming a tenant is only that
    tenant's (``tenant`` None: every tenant's, the operator's view); anything else (an
    event type we do not know) is nobody's: fail closed."""
    if "tenant" in event:
        return tenant is None or bool(event["tenant"] == tenant)
    if tenant is None and event.get("type") in OPERATOR_EVENTS:
        return True
    return event.get("type") in GLOBAL_EVENTS


class EventFeeds:
    """Live ``/v1/events`` subscriptions, so shutdown can end them all at once."""

    def __init__(self, events: Broadcast[Mapping[str, Any]]) -> None:
        self._events = events
        self._live: set[Subscription[Mapping[str, Any]]] = set()
        self.closed = False

    def close(self) -> None:
        """End every stream (their next receive fails) and refuse new ones."""
        self.closed = True
        for sub in list(self._live):
            sub.events.close()

    async def stream(
        self, tenant: str | None, epoch: Callable[[], int], scrub: Scrub, heartbeat_s: float = HEARTBEAT_S
    ) -> AsyncGenerator[bytes, None]:
        """``hello`` with the epoch, then the events of ``tenant`` (None: of every
        tenant); a comment when idle."""
        with self._events.subscribe() as sub:
            self._live.add(sub)
            try:
                yield frame("hello", {"epoch": epoch()}, scrub)
                while not self.closed:
                    event: Mapping[str, Any] | None = None
                    with trio.move_on_after(heartbeat_s):
                        try:
                            event = await sub.events.receive()
                        except (trio.ClosedResourceError, trio.EndOfChannel):
                            return
                    if event is None:
                        yield b": keepalive\n\n"
                    elif visible_to(event, tenant):
                        kind = str(event.get("type", "event"))
                        yield frame(kind, event_data(event, tenant), scrub)
            finally:
                self._live.discard(sub)


@attrs.define(eq=False)
class StreamedCall:
    """One call whose progress and result go to an SSE stream."""

    turn: Turn
    tool: str
    arguments: Any
    request_id: str
    # Cancels the call by request id (the registry's way: the server is told, the
    # call ends with a ``cancelled`` envelope, audited like any other).
    cancel_request: Callable[[], object] | None = None
    raw_request: bytes | None = None  # the HTTP body, for the audit of too-deep arguments
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    envelope: Envelope | None = None
    arrival: CallArrival | None = None  # the request's trace headers, while traces are on
    _send: trio.MemorySendChannel[ProgressReceived] = attrs.field(init=False)
    _receive: trio.MemoryReceiveChannel[ProgressReceived] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[ProgressReceived](PROGRESS_BUFFER)

    async def run(self) -> None:
        """The call (in a HostedSessions task): its envelope is set before the
        progress channel closes, so the stream sees ``result`` after all progress."""
        try:
            with self.scope:
                call = self.turn.call(
                    self.tool,
                    self.arguments,
                    progress=self._send,
                    request_id=self.request_id,
                    raw_request=self.raw_request,
                )
                self.envelope = await traced("tools/call", self.tool, self.arrival, call)
        except RequestInFlight as exc:  # the request id was taken between our check and the call
            self.envelope = failure(self.tool, "invalid_arguments", str(exc))
        except Exception:
            log.exception("streamed call failed", extra={"fields": {"tool": self.tool}})
            self.envelope = failure(
                self.tool, "server_error", f"the call to {self.tool} failed in the supervisor"
            )
        finally:
            self._send.close()

    async def stream(
        self, scrub: Scrub, heartbeat_s: float = CALL_HEARTBEAT_S
    ) -> AsyncGenerator[bytes, None]:
        """The SSE body: request_received, progress…, result, done (and comments)."""
        try:
            yield frame("request_received", {"request_id": self.request_id, "tool": self.tool}, scrub)
            async with self._receive:
                while True:
                    note: ProgressReceived | None = None
                    with trio.move_on_after(heartbeat_s):
                        try:
                            note = await self._receive.receive()
                        except trio.EndOfChannel:
                            break
                    if note is None:
                        # Hypercorn notices a departed HTTP/1.1 client only when a write
                        # fails; without these a quiet call would outlive its caller.
                        yield b": keepalive\n\n"
                    else:
                        yield frame("progress", progress_item(self.request_id, note), scrub)
            envelope = self.envelope or failure(
                self.tool, "cancelled", f"the call to {self.tool} was cancelled before it answered"
            )
            yield frame("result", envelope.as_dict(), scrub)
            yield frame("done", {"request_id": self.request_id}, scrub)
        finally:
            self.abandon()

    def abandon(self) -> None:
        """The stream ended before the call (the client left, or the drain cut it):
        cancel the call by request id, and give it ``ABANDON_GRACE_S`` to end that
        way before its task is cancelled outright (a call still waiting for an
        approval, which the registry cannot reach)."""
        if self.envelope is None and self.cancel_request is not None:
            self.cancel_request()
        self.scope.deadline = min(self.scope.deadline, trio.current_time() + ABANDON_GRACE_S)
