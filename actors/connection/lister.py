"""A connection's listings, read and published whole, and the server's log level.

The actor's lister for one server: it reads the kinds it is told to (``listing.py``;
after a change notification only that kind), carries the others over from the last
listing, and publishes one whole ``ServerListed`` each time. It also tells a server
that declared ``logging`` the least severe level we want from it
(``logging/setLevel``, the server's ``log_level``): after each connection's first
listing, and again when a reload changes the level. A refusal is logged, never fatal.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from actors.connection.listing import ALL_KINDS, ConnectionFailed, Kind, Listing, read_listing
from actors.connection.live import Live
from actors.connection.messages import Published, ServerListed
from actors.connection.vocabulary import LIST_AGAIN, Effects, Event, Listed
from actors.log_events import get_logger
from actors.protocol.errors import ProtocolError
from actors.protocol.session import ErrorReceived

log = get_logger("actors.connection")


class Lister:
    """Reads and publishes one server's listings (see the module docstring)."""

    __slots__ = ("_put", "generation", "last", "name", "owner")

    def __init__(self, name: str, owner: str | None, put: Callable[[Published], None]) -> None:
        self.name = name
        self.owner = owner
        self._put = put
        self.generation = 0
        self.last: Listing | None = None

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

    def set_level(self, live: Live) -> None:
        """Send ``logging/setLevel`` with the server's ``log_level``, in the background,
        if the server declared ``logging``."""
        if live.features.logging:
            live.nursery.start_soon(self._set_level, live, live.spec.log_level)

    async def _set_level(self, live: Live, level: str) -> None:
        fields = {"server": self.name, "level": level}
        with trio.move_on_after(live.spec.call_timeout_s):
            event = await live.request("logging/setLevel", {"level": level})
            if isinstance(event, ErrorReceived):
                error = live.redact(event.error.message)
                log.warning("logging/setLevel refused", extra={"fields": {**fields, "error": error}})
            return
        log.warning("logging/setLevel not answered", extra={"fields": fields})
