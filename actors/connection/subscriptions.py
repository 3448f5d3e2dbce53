"""Resource subscriptions of one connection, reference-counted.

Many sessions may subscribe to the same URI on one shared connection; the server
hears of it once: the first subscriber sends ``resources/subscribe``, the last one to
leave sends ``resources/unsubscribe``. Subscribers who arrive while the first one's
request is out wait for its answer and share it (a refusal drops them all). The
table outlives a connection: after a reconnect every subscribed URI is sent again.

Each ``notifications/resources/updated`` goes to the subscribers of its URI with
``try_send``: a slow or departed subscriber loses updates, never the connection.

Only a server that declared ``resources.subscribe`` is asked; anyone else gets
``unsupported``. What the server is told depends on the era the connection speaks:
``resources/subscribe`` and ``resources/unsubscribe`` in the handshake era; in the
2026-07-28 era, which has neither, a ``subscriptions/listen`` request for the URI held
open while it has subscribers (``resource_listens.py``).
"""

from __future__ import annotations

import trio

from actors.connection.live import Live
from actors.connection.messages import (
    Answered,
    CallFailed,
    CallOutcome,
    ResourceUpdated,
    Subscribe,
    Unsubscribe,
    unavailable,
)
from actors.connection.vocabulary import Route
from actors.log_events import get_logger
from actors.mailbox import answer, try_send
from actors.protocol.era import Era
from actors.protocol.session import ErrorReceived

log = get_logger("actors.connection")

Updates = trio.MemorySendChannel[ResourceUpdated]


class Subscriptions:
    """Who is subscribed to which URI on one server, and what the server was told."""

    __slots__ = ("_confirming", "_parked", "_table", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._table: dict[str, dict[str, Updates]] = {}
        self._confirming: dict[str, list[Subscribe]] = {}  # the server's answer is awaited
        self._parked: list[Subscribe] = []  # waiting for the connection's start

    def subscribers(self, uri: str) -> tuple[str, ...]:
        """Who is subscribed to ``uri`` (for tests and status)."""
        return tuple(self._table.get(uri, ()))

    # ------------------------------------------------------------- subscribing

    def take(self, message: Subscribe | Unsubscribe, route: Route, live: Live | None) -> bool:
        """Handle a message as the machine's call route says (as a call would be);
        True: it waits for the connection's start, which the actor must ask for."""
        if isinstance(message, Unsubscribe):
            self.unsubscribe(message, live if route is Route.SEND else None)
        elif route is Route.SEND and live is not None:
            self.subscribe(message, live)
        elif route is Route.PARK:
            self._parked.append(message)
            return True
        else:
            answer(message.reply, unavailable(self.name))
        return False

    def fail_parked(self, failure: CallFailed) -> None:
        """The start failed: answer every parked subscriber."""
        parked, self._parked = self._parked, []
        for message in parked:
            answer(message.reply, failure)

    def subscribe(self, message: Subscribe, live: Live) -> None:
        """Subscribe on a connection that has listed (its features are known)."""
        refusal = self._unsupported(live)
        if refusal is not None:
            answer(message.reply, refusal)
            return
        uri = message.uri
        subscribers = self._table.setdefault(uri, {})
        subscribers[message.subscriber] = message.updates
        if uri in self._confirming:
            self._confirming[uri].append(message)
        elif len(subscribers) == 1:
            self._confirming[uri] = [message]
            live.nursery.start_soon(self._confirm, live, uri)
        else:
            answer(message.reply, Answered({}))

    def connected(self, live: Live) -> None:
        """A connection has listed: tell the server every URI subscribed before (a
        reconnect), then take the subscribers who waited for the start."""
        if self._table and self._unsupported(live) is None:
            for uri in self._table:
                live.nursery.start_soon(self._resend, live, uri)
        parked, self._parked = self._parked, []
        for message in parked:
            self.subscribe(message, live)

    def _unsupported(self, live: Live) -> CallFailed | None:
        if not live.features.subscribe:
            text = f"mcp server {self.name} does not support resource subscriptions"
            return CallFailed("unsupported", f"{text} (it did not declare resources.subscribe)")
        return None

    async def _tell(self, live: Live, uri: str) -> CallOutcome:
        """Subscribe the connection to ``uri``, as its era does."""
        if live.session.era is Era.PER_REQUEST:
            return await live.listener.resources.open(uri)
        return await self._ask(live, "resources/subscribe", uri)

    async def _confirm(self, live: Live, uri: str) -> None:
        outcome: CallOutcome = unavailable(self.name)
        try:
            outcome = await self._tell(live, uri)
        finally:
            waiting = self._confirming.pop(uri, [])
            subscribers = self._table.get(uri, {})
            for message in waiting:
                if not isinstance(outcome, Answered):
                    subscribers.pop(message.subscriber, None)
                answer(message.reply, outcome)
            if not subscribers:
                self._table.pop(uri, None)
                if isinstance(outcome, Answered):  # everyone left while it was out
                    live.nursery.start_soon(self._leave, live, uri, None)

    async def _resend(self, live: Live, uri: str) -> None:
        outcome = await self._tell(live, uri)
        if isinstance(outcome, CallFailed):
            log.warning(
                "resubscribe failed",
                extra={"fields": {"server": self.name, "uri": uri, "error": outcome.message}},
            )

    async def _ask(self, live: Live, method: str, uri: str) -> CallOutcome:
        with trio.move_on_after(live.spec.call_timeout_s):
            event = await live.request(method, {"uri": uri})
            if isinstance(event, ErrorReceived):
                text = live.redact(event.error.message)
                return CallFailed(
                    "server_error",
                    f"mcp server {self.name} answered {method} {uri} with error {event.error.code}: {text}",
                )
            return Answered(event.result)
        text = f"mcp server {self.name} did not answer {method} {uri} within {live.spec.call_timeout_s:g} s"
        return CallFailed("timeout", text)

    # ----------------------------------------------------------- unsubscribing

    def unsubscribe(self, message: Unsubscribe, live: Live | None) -> None:
        """Drop a subscriber; the last one tells the server (when it is connected)."""
        uri = message.uri
        self._parked = [p for p in self._parked if (p.uri, p.subscriber) != (uri, message.subscriber)]
        subscribers = self._table.get(uri)
        removed = subscribers is not None and subscribers.pop(message.subscriber, None) is not None
        last = removed and not subscribers and uri not in self._confirming
        if last:
            del self._table[uri]
        if last and live is not None and self._unsupported(live) is None:
            live.nursery.start_soon(self._leave, live, uri, message.reply)
        elif message.reply is not None:
            answer(message.reply, Answered({}))

    async def _leave(self, live: Live, uri: str, reply: trio.MemorySendChannel[CallOutcome] | None) -> None:
        outcome: CallOutcome = Answered({})  # the connection died: nothing is left to unsubscribe
        try:
            if live.session.era is Era.PER_REQUEST:
                live.listener.resources.close(uri)
            else:
                outcome = await self._ask(live, "resources/unsubscribe", uri)
        finally:
            if reply is not None:
                answer(reply, outcome)

    # ----------------------------------------------------------------- updates

    def updated(self, uri: str) -> None:
        """``notifications/resources/updated``: to each subscriber of ``uri``."""
        subscribers = self._table.get(uri)
        if not subscribers:
            return
        update = ResourceUpdated(self.name, uri)
        for updates in subscribers.values():
            try_send(updates, update)
