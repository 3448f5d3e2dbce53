"""A connection's listings, read and published whole, and the server's log level.

The actor's lister for one server: it reads the kinds it is told to (``listing.py``;
after a change notification only that kind), carries the others over from the last
listing, and publishes one whole ``ServerListed`` each time. It also tells a server of
the handshake era that declared ``logging`` the least severe level anyone wants from
it (``logging/setLevel`` with ``LogLevels.asked``: the server's ``log_level`` or its
clients' level, ``log_levels.py``): after each connection's first listing, and again
when a reload or the clients change it. A refusal is logged, never fatal. (The
per-request era has no ``logging/setLevel``: each call asks in its ``_meta``.)
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from actors.connection.listing import ALL_KINDS, ConnectionFailed, Kind, Listing, read_listing
from actors.connection.live import Live
from actors.connection.log_levels import LogLevels
from actors.connection.messages import Published, ServerListed
from actors.connection.vocabulary import LIST_AGAIN, Effects, Event, Listed
from actors.log_events import get_logger
from actors.protocol.era import Era
from actors.protocol.errors import ProtocolError
from actors.protocol.session import ErrorReceived

log = get_logger("actors.connection")


class Lister:
    """Reads and publishes one server's listings (see the module docstring)."""

    __slots__ = ("_asked", "_put", "generation", "last", "levels", "name", "owner")

    def __init__(
        self, name: str, owner: str | None, put: Callable[[Published], None], levels: LogLevels
    ) -> None:
        self.name = name
        self.owner = owner
        self._put = put
        self.generation = 0
        self.last: Listing | None = None
        self.levels = levels
        self._asked: tuple[Live, str] | None = None  # the level a connection was last asked for

    async def list(self, live: Live, kinds: frozenset[Kind], fire: Callable[[Event], Effects]) -> None:
        """Read ``kinds`` and publish; again (what changed meanwhile) while the machine
        answers ``Listed`` with ``ListAgain``."""
        live.pending.clear()  # the first listing of a connection reads every kind
        while True:
            await self.list_once(live, kinds)
            if LIST_AGAIN not in fire(Listed(trio.current_time())):
                return
            kinds = live.take_pending()

    async def relist(self, live: Live, fire: Callable[[Event], Effects]) -> None:
        """Task body (``StartRelist``): read again what changed; a server that does not
        answer in time, or breaks the protocol, fails its connection."""
        kinds = live.take_pending()
        try:
            with trio.fail_after(live.spec.init_timeout_s):
                await self.list(live, kinds, fire)
        except trio.TooSlowError:
            changed = ", ".join(sorted(kind.value for kind in kinds))
            live.fail(f"mcp server {self.name} did not list {changed} again after list_changed")
        except (ConnectionFailed, ProtocolError) as exc:
            live.fail(str(exc))

    async def list_once(self, live: Live, kinds: frozenset[Kind] = ALL_KINDS) -> None:
        """Read ``kinds`` on ``live`` and publish the whole listing."""
        ttls: list[int] = []
        listing = await read_listing(
            live.request,
            self.name,
            live.features,
            kinds=kinds,
            previous=self.last,
            era=live.session.era,
            ttls=ttls,
        )
        if Kind.TOOLS in kinds:
            live.listed(listing.tools)  # calls are checked against these from now on
            live.list_expires(ttls)  # relist in the background when the ttlMs runs out
        for problem in listing.problems:
            log.warning("listing problem: %s", problem, extra={"server": self.name})
        self.last = listing
        self.generation += 1
        self._put(
            ServerListed(
                self.name,
                self.generation,
                listing.tools,
                listing.problems,
                self.owner,
                resources=listing.resources,
                templates=listing.templates,
                prompts=listing.prompts,
                features=live.features,
            )
        )

    def want(self, level: str | None, live: Live | None) -> None:
        """The clients want ``level`` now (``WantLogs``); ``live``: the connection, if calls
        flow on it."""
        self.levels.wanted = level
        if live is not None:
            self.set_level(live)

    def retuned(self, own: str, live: Live | None) -> None:
        """A reload set the server's ``log_level`` (maybe the same)."""
        self.levels.own = own
        if live is not None:
            self.set_level(live)

    def set_level(self, live: Live) -> None:
        """Send ``logging/setLevel`` with the level wanted now, in the background, if the
        server declared ``logging`` in the handshake era and was not asked for it yet."""
        level = self.levels.asked()
        if not live.features.logging or live.session.era is not Era.HANDSHAKE:
            return
        if self._asked is not None and self._asked == (live, level):
            return
        self._asked = (live, level)
        live.nursery.start_soon(self._set_level, live, level)

    async def _set_level(self, live: Live, level: str) -> None:
        fields = {"server": self.name, "level": level}
        with trio.move_on_after(live.spec.call_timeout_s):
            event = await live.request("logging/setLevel", {"level": level})
            if isinstance(event, ErrorReceived):
                error = live.redact(event.error.message)
                log.warning("logging/setLevel refused", extra={"fields": {**fields, "error": error}})
            return
        log.warning("logging/setLevel not answered", extra={"fields": fields})
