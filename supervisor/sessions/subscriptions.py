"""One session's resource subscriptions, and the updates they bring.

``Session.subscribe`` resolves a URI like ``Turn.read_resource`` does (against the
session's current catalog: ``supervisor/calls/surface_targets.py``) and sends ``Subscribe``
to the server's connection actor, which counts subscribers per URI on its shared
connection: the first sends ``resources/subscribe``, the last one to leave
``resources/unsubscribe``. The actor sends each ``notifications/resources/updated``
to the session's raw channel; a task of the session's nursery hands it on to
``Session.resource_updates`` as a ``ResourceUpdate`` with the URI as the session was
shown it. A host that falls more than ``UPDATES_BUFFER`` updates behind loses the
newer ones, never the connection.

A session that ends unsubscribes from everything it subscribed to (``Unsubscribe``,
no reply awaited), then closes ``resource_updates`` (a reader's loop ends).
"""

from __future__ import annotations

import contextlib

import attrs
import trio

from actors.connection.messages import (
    Answered,
    CallFailed,
    CallOutcome,
    ConnectionMessage,
    ResourceUpdated,
    Subscribe,
    Unsubscribe,
    unavailable,
    unavailable_text,
)
from actors.connection.states import Availability
from actors.mailbox import try_send
from actors.router.catalog import Catalog
from actors.router.envelope import CallError, Envelope, failure
from supervisor.calls.surface_targets import resource_target

UPDATES_BUFFER = 256
"""Updates kept for a host that has not read them yet (then newer ones are lost)."""


@attrs.frozen(slots=True)
class ResourceUpdate:
    """A subscribed resource changed: ``uri`` as the session was shown it, its
    ``server``, and ``server_uri`` as that server names it. Read it again to see what
    changed."""

    uri: str
    server: str
    server_uri: str


Key = tuple[str, str]
"""(server, server URI)"""


class Subscriptions:
    """What one session (``subscriber``) is subscribed to, and where updates go."""

    def __init__(self, subscriber: str, nursery: trio.Nursery) -> None:
        self._subscriber = subscriber
        self._nursery = nursery
        self._raw, self._raw_updates = trio.open_memory_channel[ResourceUpdated](UPDATES_BUFFER)
        self._updates, self.updates = trio.open_memory_channel[ResourceUpdate](UPDATES_BUFFER)
        self._held: dict[Key, tuple[str, trio.MemorySendChannel[ConnectionMessage]]] = {}
        self._forwarding = False

    async def subscribe(self, catalog: Catalog, uri: str, server: str | None) -> Envelope:
        """Subscribe to one resource (see ``Session.subscribe``)."""
        target = resource_target(catalog, uri, server)
        if isinstance(target, CallError):
            return failure(uri, target.code, target.message)
        view = catalog.servers[target.server]
        shown = target.shown
        if view.generation and not view.features.subscribe:
            why = f"mcp server {view.name} does not offer resource subscriptions (it did not declare them)"
            return failure(shown, "unsupported", why)
        if view.availability is Availability.UNAVAILABLE:
            return failure(shown, "unavailable", unavailable_text(view.name, f"({view.state.value})"))
        key = (target.server, target.server_uri)
        if key in self._held:
            return _done(shown, f"subscribed to {shown} already")
        if not self._forwarding:
            self._forwarding = True
            self._nursery.start_soon(self._forward)
        self._held[key] = (shown, view.mailbox)  # before the answer: an update may come first
        reply, answers = trio.open_memory_channel[CallOutcome](1)
        message = Subscribe(target.server_uri, self._subscriber, self._raw, reply)
        try:
            outcome = await _ask(view.mailbox, message, answers, view.name)
        except BaseException:  # cancelled: the actor may have counted us, so leave again
            self._held.pop(key, None)
            try_send(view.mailbox, Unsubscribe(target.server_uri, self._subscriber))
            raise
        if isinstance(outcome, Answered):
            return _done(shown, f"subscribed to {shown}", outcome)
        self._held.pop(key, None)
        return _failed(shown, outcome)

    async def unsubscribe(self, catalog: Catalog, uri: str, server: str | None) -> Envelope:
        """Drop one subscription (see ``Session.unsubscribe``)."""
        key = next(
            (k for k, (shown, _) in self._held.items() if shown == uri and server in (None, k[0])), None
        )
        if key is None:
            target = resource_target(catalog, uri, server)
            if isinstance(target, CallError):
                return failure(uri, target.code, target.message)
            key = (target.server, target.server_uri)
        held = self._held.pop(key, None)
        if held is None:
            return _done(uri, f"not subscribed to {uri}")
        shown, mailbox = held
        reply, answers = trio.open_memory_channel[CallOutcome](1)
        outcome = await _ask(mailbox, Unsubscribe(key[1], self._subscriber, reply), answers, key[0])
        if isinstance(outcome, Answered):
            return _done(shown, f"unsubscribed from {shown}", outcome)
        return _failed(shown, outcome)

    async def close(self) -> None:
        """The session ends: leave every subscription, then end ``updates``."""
        held, self._held = self._held, {}
        for (_server, server_uri), (_shown, mailbox) in held.items():
            leave = Unsubscribe(server_uri, self._subscriber)
            if not try_send(mailbox, leave):
                # a connection that is gone took its subscriptions with it
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await mailbox.send(leave)
        self._updates.close()

    async def _forward(self) -> None:
        async for update in self._raw_updates:
            held = self._held.get((update.server, update.uri))
            if held is not None:
                try_send(self._updates, ResourceUpdate(held[0], update.server, update.uri))


async def _ask(
    mailbox: trio.MemorySendChannel[ConnectionMessage],
    message: ConnectionMessage,
    answers: trio.MemoryReceiveChannel[CallOutcome],
    server: str,
) -> CallOutcome:
    try:
        await mailbox.send(message)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return unavailable(server)
    return await answers.receive()


def _done(uri: str, text: str, outcome: Answered | None = None) -> Envelope:
    structured = dict(outcome.result) if outcome is not None else None
    return Envelope(
        ok=True, tool=uri, text=text, content=({"type": "text", "text": text},), structured=structured
    )


def _failed(uri: str, outcome: CallOutcome) -> Envelope:
    if isinstance(outcome, CallFailed):
        return failure(uri, outcome.code, outcome.message)
    return failure(uri, "server_error", f"{uri}: the answer is not a subscription's result")
