"""A tenant's resource updates, shared by its new-era clients' listen streams.

New-era clients of one tenant share one supervisor ``Session`` (``tenants.py``), and
each ``subscriptions/listen`` stream (``listen.py``) names the URIs it wants in its
``resourceSubscriptions``. The session is subscribed to a URI once, while at least
one open stream wants it: the first stream to want it subscribes the session (which
goes on to the server's connection: ``resources/subscribe`` in the handshake era, a
listen request of its own in the 2026-07-28 one), and the last one to end, by its
client hanging up or the gateway stopping, unsubscribes it. Each update goes to the
streams that want its URI, and no other.

``Interests`` counts who wants what, without I/O, so the counting is tested alone.
``ResourceFanout`` does the subscribing around it, one step at a time (a lock), so a
stream that joins while another leaves the same URI never finds it left behind its
back: whether the session must subscribe or unsubscribe is read again under the lock.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Hashable, Iterable

import trio

from supervisor.sessions.session import Session
from supervisor.sessions.subscriptions import ResourceUpdate

Updates = trio.MemorySendChannel[ResourceUpdate]


class Interests:
    """Which stream wants which URIs, and how many want each URI."""

    def __init__(self) -> None:
        self._wants: dict[Hashable, set[str]] = {}
        self._count: Counter[str] = Counter()

    def wanted(self, uri: str) -> bool:
        """Does any stream want ``uri`` (is the session to stay subscribed)?"""
        return self._count[uri] > 0

    def wants(self, stream: Hashable, uri: str) -> bool:
        return uri in self._wants.get(stream, ())

    def add(self, stream: Hashable, uri: str) -> bool:
        """``stream`` wants ``uri`` too; True if no stream wanted it before."""
        mine = self._wants.setdefault(stream, set())
        if uri in mine:
            return False
        mine.add(uri)
        self._count[uri] += 1
        return self._count[uri] == 1

    def drop(self, stream: Hashable) -> list[str]:
        """``stream`` ended: the URIs that nobody wants any more."""
        left = []
        for uri in sorted(self._wants.pop(stream, ())):
            self._count[uri] -= 1
            if self._count[uri] <= 0:
                del self._count[uri]
                left.append(uri)
        return left


class ResourceFanout:
    """A tenant session's resource updates, handed to the listen streams that want them."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._interests = Interests()
        self._streams: dict[Hashable, Updates] = {}
        self._lock = trio.Lock()  # one subscribe or unsubscribe of the session at a time

    async def run(self) -> None:
        """Until the session ends (its update channel closes)."""
        async for update in self._session.resource_updates:
            for stream, send in list(self._streams.items()):
                if self._interests.wants(stream, update.uri):
                    # a stream that does not read loses updates, never blocks the others
                    with contextlib.suppress(trio.WouldBlock):
                        send.send_nowait(update)

    async def join(self, stream: Hashable, uris: Iterable[str], send: Updates) -> list[str]:
        """Subscribe ``stream`` to ``uris``: the ones the session could subscribe to.
        ``leave`` must follow, also when this is cancelled."""
        self._streams[stream] = send
        agreed = []
        for uri in dict.fromkeys(uris):
            async with self._lock:
                if not self._interests.wanted(uri) and not (await self._session.subscribe(uri)).ok:
                    continue
                self._interests.add(stream, uri)
            agreed.append(uri)
        return agreed

    async def leave(self, stream: Hashable) -> None:
        """``stream`` ended: unsubscribe the session from what nobody wants now."""
        self._streams.pop(stream, None)
        left = self._interests.drop(stream)  # counted at once, whatever of the rest is done
        async with self._lock:
            for uri in left:
                if not self._interests.wanted(uri):  # nobody joined it meanwhile
                    await self._session.unsubscribe(uri)
