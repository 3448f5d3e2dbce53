"""Hearing list changes in the 2026-07-28 era: a connection's ``subscriptions/listen``.

The era sends list changes only to a client that asked for them with
``subscriptions/listen`` (``actors/protocol/listen.py``). Over Streamable HTTP the
transport opens that request as a stream of its own (``Abilities.listens``); over a
duplex transport (stdio, the WebSocket bridge) this module sends it as one more
request on the connection, once the era's first answer (``server/discover``, or an
``initialize`` naming the era's version) offered list changes, and matches its
acknowledgement and its notifications by the subscription id their ``_meta`` carries:
a change notification stamped with another id is not ours and changes nothing.

Its end, unasked, follows ``after_listen``: refused with -32601, the server stays
without one (its lists are still read again when their ``ttlMs`` runs out,
``freshness.py``); any other end is answered by sending it again after
``REOPEN_AFTER_S``, and the third attempt in a row that ends before it was
acknowledged loses the connection (``Failed``: backoff), as a listen stream over HTTP
that cannot be reopened does.

Every acknowledgement after the connection's first (on either transport: HTTP passes
on those of the streams it reopened) means that changes may have gone unheard
meanwhile; the server may even have restarted (a graceful restart ends the
subscription). So the connection asks ``server/discover`` again (a changed answer
brings its new features; one that no longer names our revision loses the connection)
and reads every kind again; the router moves the catalog only if something changed.

The listen requests of resource subscriptions are ``resource_listens.py``'s (one per
URI, ``resources``): their acknowledgements and cancellations are handed to it first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import trio

from actors.connection.listing import ALL_KINDS
from actors.connection.resource_listens import ResourceListens
from actors.log_events import get_logger
from actors.protocol.era import Era, mutual_version
from actors.protocol.errors import ProtocolError
from actors.protocol.listen import (
    LISTEN,
    REOPEN_AFTER_S,
    REOPEN_ATTEMPTS,
    AfterListen,
    after_listen,
    listen_filter,
    listen_params,
)
from actors.protocol.messages import DiscoverResult, RequestId, ServerFeatures
from actors.protocol.payloads import structure_discover_result
from actors.protocol.session import ErrorReceived, ListenAcknowledged, ResponseReceived

if TYPE_CHECKING:
    from actors.connection.live import Live

log = get_logger("actors.connection")


class ChangeListener:
    """One connection's ``subscriptions/listen`` (see the module docstring)."""

    __slots__ = ("_acknowledged", "_acks", "_ending", "_listening", "_live", "_own", "_resources")

    def __init__(self, live: Live, *, own: bool) -> None:
        self._live = live
        self._own = own  # we send the request (a duplex transport), not the transport
        self._listening: RequestId | None = None  # our listen request in flight
        self._acknowledged = False  # ... and whether the server acknowledged it
        self._acks = 0  # acknowledgements on this connection
        self._ending: trio.CancelScope | None = None  # cancelled when the server cancels our request
        # Made at a connection's first resource subscription: a connection holds no
        # empty table (bench_memory.py counts every byte per connection).
        self._resources: ResourceListens | None = None

    @property
    def resources(self) -> ResourceListens:
        """The listen requests of resource subscriptions."""
        if self._resources is None:
            self._resources = ResourceListens(self._live)
        return self._resources

    def start(self) -> None:
        """Once the era is settled: listen, if ours to do and the server offers changes."""
        session = self._live.session
        if not self._own or session.era is not Era.PER_REQUEST:
            return
        wanted = listen_filter({"capabilities": session.capabilities_of_server})
        if wanted:
            self._live.nursery.start_soon(self._listen, wanted)

    def hears(self, subscription: RequestId | None) -> bool:
        """Is a change notification stamped with ``subscription`` one to act on? Ours,
        or none (the handshake era stamps nothing); over HTTP the transport already
        kept to its own streams."""
        return subscription is None or not self._own or subscription == self._listening

    def acknowledged(self, event: ListenAcknowledged) -> None:
        """The server acknowledged a listen request (ours, the transport's, or one
        of a resource subscription: ``resources``)."""
        subscription = event.subscription
        if self._resources is not None and self._resources.acknowledged(event):
            return
        if self._own:
            if subscription is None or subscription != self._listening:
                return
            self._acknowledged = True
        self._acks += 1
        if self._acks > 1:  # subscribed again: what happened in between went unheard
            self._live.nursery.start_soon(self._refresh)

    def cancelled(self, request_id: RequestId) -> None:
        """The server cancelled one of our requests: if a listen request, it ended."""
        if self._resources is not None and self._resources.cancelled(request_id):
            return
        if self._own and request_id == self._listening and self._ending is not None:
            self._ending.cancel()

    async def _listen(self, wanted: Mapping[str, bool]) -> None:
        """Task body: keep a listen request open, by ``after_listen``."""
        live = self._live
        failures = 0
        while True:
            self._acknowledged = False
            answer: ResponseReceived | ErrorReceived | None = None
            with trio.CancelScope() as self._ending:
                answer = await live.request(LISTEN, listen_params(wanted), sent=self._sent)
            self._listening = None
            refusal = answer.error if isinstance(answer, ErrorReceived) else None
            code = refusal.code if refusal is not None else None
            step, failures = after_listen(acknowledged=self._acknowledged, code=code, failures=failures)
            ended = f"answered with error {code}: {refusal.message}" if refusal else "ended"
            if step is AfterListen.STOP:
                log.debug("subscriptions/listen refused", extra=_fields(live))
                return
            if step is AfterListen.LOST:
                live.fail(
                    f"mcp server {live.name}: subscriptions/listen {ended} before it was "
                    f"acknowledged, {REOPEN_ATTEMPTS} times in a row"
                )
                return
            log.debug(
                "subscriptions/listen %s; listening again", ended, extra={"fields": {"server": live.name}}
            )
            await trio.sleep(REOPEN_AFTER_S)

    def _sent(self, request_id: RequestId) -> None:
        self._listening = request_id

    async def _refresh(self) -> None:
        """Task body: after a new subscription, ask ``server/discover`` again (the
        per-request era found by it), then read every kind again."""
        live = self._live
        if live.session.era is Era.PER_REQUEST and live.session.discovered is not None:
            with trio.move_on_after(live.spec.call_timeout_s):
                answer = await live.request("server/discover")
                if isinstance(answer, ResponseReceived) and not self._rediscovered(answer.result):
                    return
        live.changed(ALL_KINDS)

    def _rediscovered(self, result: Mapping[str, object]) -> bool:
        """Take a later ``server/discover`` answer; False: the connection is lost."""
        live = self._live
        try:
            found: DiscoverResult = structure_discover_result(result)
        except ProtocolError:
            return True  # not the era's evidence either way: the lists are read again
        if mutual_version(found) is None:
            named = ", ".join(found.supported_versions) or "none"
            live.fail(
                f"mcp server {live.name} no longer names {live.session.version} in server/discover "
                f"(supported versions: {named})"
            )
            return False
        previous = live.session.capabilities_of_server
        live.session.discovered = found  # what it declares from now on; the revision stays
        if found.capabilities != previous:
            live.features = ServerFeatures.of(found.capabilities)
            log.info(
                "server/discover answered with new capabilities", extra={"fields": {"server": live.name}}
            )
        return True


def _fields(live: Live) -> dict[str, object]:
    return {"fields": {"server": live.name}}
