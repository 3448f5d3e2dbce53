"""Resource subscriptions in the 2026-07-28 era: one ``subscriptions/listen`` per URI.

The era has no ``resources/subscribe``: a client names the URIs whose
``notifications/resources/updated`` it wants in a listen request's
``resourceSubscriptions``, and the request stays open as long as it wants them.
``subscriptions.py`` counts a URI's subscribers on the connection; for the first it
``open``s a listen request for that URI alone, for the last it ``close``s it. One
request a URI, so leaving one never touches the others. A request we close is
cancelled: ``notifications/cancelled`` on a duplex transport, its POST's stream
closed over HTTP (the era's cancellation there: ``actors/transports/held_listens.py``).

The acknowledgement naming the URI confirms the subscription; one that leaves it out
refuses it (``unsupported``), and so does an answer before any acknowledgement, as an
error answer to ``resources/subscribe`` does. A request that ends after that is sent
again, as the list changes' one is (``listener.py``, by ``after_listen``): after
``REOPEN_AFTER_S``; the third in a row that ends unacknowledged loses the connection,
and one refused outright is given up, logged (as a resubscription after a reconnect
is in the handshake era). A reconnect is a new connection with none open:
``subscriptions.py`` opens them again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

from actors.connection.messages import Answered, CallFailed, CallOutcome
from actors.log_events import get_logger
from actors.protocol.listen import (
    LISTEN,
    REOPEN_AFTER_S,
    RESOURCE_SUBSCRIPTIONS,
    AfterListen,
    after_listen,
    listen_params,
)
from actors.protocol.messages import ErrorObject, RequestId
from actors.protocol.session import ErrorReceived, ListenAcknowledged, ResponseReceived

if TYPE_CHECKING:
    from actors.connection.live import Live

log = get_logger("actors.connection")


@attrs.define(eq=False)
class _Held:
    """One URI's listen request, through its reopenings."""

    uri: str
    request: RequestId | None = None  # the request open now
    acknowledged: bool = False  # ... and whether the server acknowledged it
    leaving: bool = False  # closed by us: cancel it on the wire
    outcome: CallOutcome | None = None  # the first request's: the subscription's answer
    settled: trio.Event = attrs.field(factory=trio.Event)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)  # the whole hold
    request_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)  # the request open now

    def settle(self, outcome: CallOutcome) -> None:
        if self.outcome is None:
            self.outcome = outcome
            self.settled.set()


class ResourceListens:
    """One connection's listen requests for resource updates (see the module docstring)."""

    __slots__ = ("_held", "_live", "_requests")

    def __init__(self, live: Live) -> None:
        self._live = live
        self._held: dict[str, _Held] = {}  # by URI, while it is wanted
        self._requests: dict[RequestId, _Held] = {}  # by the request open now, until it ends

    async def open(self, uri: str) -> CallOutcome:
        """Listen for ``uri``'s updates: ``Answered`` once the server acknowledged it,
        ``CallFailed`` if it refused or did not answer within the call timeout."""
        held = self._held.get(uri)
        if held is None:
            held = self._held[uri] = _Held(uri)
            self._live.nursery.start_soon(self._hold, held)
        timeout = self._live.spec.call_timeout_s
        with trio.move_on_after(timeout):
            await held.settled.wait()
        if held.outcome is None:
            self.close(uri)
            text = f"mcp server {self._live.name} did not acknowledge {LISTEN} for {uri} within {timeout:g} s"
            return CallFailed("timeout", text)
        return held.outcome

    def close(self, uri: str) -> None:
        """Stop listening for ``uri``'s updates (the server is told, not waited for)."""
        held = self._held.pop(uri, None)
        if held is not None:
            held.leaving = True
            held.scope.cancel()

    def acknowledged(self, event: ListenAcknowledged) -> bool:
        """An acknowledgement: True if it is one of ours (then taken here)."""
        held = self._requests.get(event.subscription) if event.subscription is not None else None
        if held is None:
            return False
        held.acknowledged = True
        if held.uri in event.resources:
            held.settle(Answered({}))
        elif held.outcome is None:
            text = f"mcp server {self._live.name} did not agree to send updates of {held.uri}"
            held.settle(CallFailed("unsupported", f"{text} (its {LISTEN} acknowledgement left it out)"))
            self.close(held.uri)
        return True

    def cancelled(self, request_id: RequestId) -> bool:
        """The server cancelled a request of ours: True if one of these (it ended)."""
        held = self._requests.get(request_id)
        if held is not None:
            held.request_scope.cancel()
        return held is not None

    async def _hold(self, held: _Held) -> None:
        """Task body: keep ``held``'s request open until it is closed."""
        live = self._live
        failures = 0
        with held.scope:
            while True:
                held.acknowledged = False
                answer = await self._once(held)
                refusal = answer.error if isinstance(answer, ErrorReceived) else None
                if held.outcome is None or (refusal is not None and not held.acknowledged):
                    self._refused(held, refusal)
                    break
                step, failures = after_listen(acknowledged=held.acknowledged, code=None, failures=failures)
                if step is AfterListen.LOST:
                    live.fail(
                        f"mcp server {live.name}: {LISTEN} for {held.uri} ended before it was "
                        f"acknowledged, {failures} times in a row"
                    )
                    break
                await trio.sleep(REOPEN_AFTER_S)
        held.settle(CallFailed("cancelled", f"{LISTEN} for {held.uri} was closed before it was acknowledged"))
        if self._held.get(held.uri) is held:
            del self._held[held.uri]

    async def _once(self, held: _Held) -> ResponseReceived | ErrorReceived | None:
        """One listen request, to its end: its answer, None if the server cancelled it."""
        live = self._live
        params = listen_params({RESOURCE_SUBSCRIPTIONS: [held.uri]})

        def sent(request_id: RequestId) -> None:
            held.request = request_id
            self._requests[request_id] = held

        with trio.CancelScope() as held.request_scope:
            try:
                return await live.request(LISTEN, params, sent=sent)
            except trio.Cancelled:
                if held.leaving and held.request is not None:
                    live.session.send_cancelled(held.request, "unsubscribed")
                    live.writes.kick()
                raise
            finally:
                if held.request is not None:
                    del self._requests[held.request]
                held.request = None
        return None

    def _refused(self, held: _Held, refusal: ErrorObject | None) -> None:
        """The first request ended unacknowledged (the subscription is refused), or a
        reopened one was refused (the subscription is lost: logged)."""
        live = self._live
        said = f"answered with error {refusal.code}: {live.redact(refusal.message)}" if refusal else "ended"
        text = f"mcp server {live.name}: {LISTEN} for {held.uri} {said}"
        if held.outcome is None:
            held.settle(CallFailed("server_error", f"{text} before it was acknowledged"))
        else:
            fields = {"server": live.name, "uri": held.uri, "error": text}
            log.warning("resubscribe failed", extra={"fields": fields})
