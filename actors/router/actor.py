"""RouterActor: the one owner of the catalog.

Connection actors publish ``ToolsListed`` and ``StateChanged`` into the router's
mailbox; the router folds them into a new immutable ``Catalog`` and makes it current
in a ``CatalogCell``. Messages that arrive together are folded into one epoch.
Turns read the cell's current catalog (a reference to a frozen object: nothing is
shared that anybody can change) and may wait for the next epoch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import attrs
import trio

from actors.connection.messages import ConnectionMessage, Published, StateChanged, ToolsListed
from actors.connection.spec import ServerSpec
from actors.connection.states import State
from actors.router.catalog import Catalog, ServerView, index_tools

log = logging.getLogger("actors.router")


@attrs.frozen(slots=True, eq=False)
class RegisterServer:
    """A connection actor exists for ``spec`` (owner: the session of a private one)."""

    spec: ServerSpec
    mailbox: trio.MemorySendChannel[ConnectionMessage]
    owner: str | None = None


@attrs.frozen(slots=True)
class DropOwner:
    """A session ended: forget its private servers."""

    owner: str


RouterMessage = Published | RegisterServer | DropOwner


class CatalogCell:
    """Holds the current catalog; only the router sets it."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self._changed = trio.Event()

    @property
    def current(self) -> Catalog:
        """The newest catalog."""
        return self._catalog

    def _set(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self._changed.set()
        self._changed = trio.Event()

    async def wait_until(self, predicate: Callable[[Catalog], bool]) -> Catalog:
        """Wait for a catalog that satisfies ``predicate`` (the current one counts)."""
        while not predicate(self._catalog):
            await self._changed.wait()
        return self._catalog


def _available(previous: ServerView, message: StateChanged) -> bool:
    if message.state is State.STEADY:
        return True
    # A relist after list_changed (steady → list) keeps calls flowing on the old list.
    return message.state is State.LIST and previous.state is State.STEADY and previous.available


class RouterActor:
    """Owns the catalog; see the module docstring."""

    def __init__(
        self,
        servers: Sequence[tuple[ServerSpec, trio.MemorySendChannel[ConnectionMessage]]],
        mailbox: trio.MemoryReceiveChannel[RouterMessage],
    ) -> None:
        self._mailbox = mailbox
        shared = {spec.name: ServerView(spec.name, spec, channel) for spec, channel in servers}
        self._shared: dict[str, ServerView] = shared
        self._overlays: dict[str, dict[str, ServerView]] = {}
        tools, listing = index_tools(shared)
        self.cell = CatalogCell(Catalog(1, dict(shared), tools, listing, {}))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fold messages into epochs until the mailbox closes."""
        task_status.started()
        # Closing the receive end when the router ends makes late publishers fail fast
        # instead of blocking on a full mailbox nobody reads.
        async with self._mailbox:
            await self._fold()

    async def _fold(self) -> None:
        async for message in self._mailbox:
            touched_shared = self._apply(message)
            while True:  # fold whatever else is already queued into the same epoch
                try:
                    more = self._mailbox.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                touched_shared = self._apply(more) or touched_shared
            self._publish(touched_shared)

    def _apply(self, message: RouterMessage) -> bool:
        """Fold one message in; True when a shared server changed."""
        if isinstance(message, RegisterServer):
            view = ServerView(message.spec.name, message.spec, message.mailbox, owner=message.owner)
            return self._store(view)
        if isinstance(message, DropOwner):
            self._overlays.pop(message.owner, None)
            return False
        views = self._overlays.get(message.owner, {}) if message.owner else self._shared
        previous = views.get(message.server)
        if previous is None:
            log.warning("message for unknown server %s dropped", message.server)
            return False
        if isinstance(message, ToolsListed):
            view = attrs.evolve(
                previous,
                generation=message.generation,
                tool_names=tuple(t.name for t in message.tools),
                raw_tools=message.tools,
                problems=message.problems,
            )
        else:
            view = attrs.evolve(
                previous,
                state=message.state,
                since=message.at,
                attempt=message.attempt,
                last_error=message.reason if message.reason else previous.last_error,
                next_retry_at=message.next_retry_at,
                available=_available(previous, message),
            )
        return self._store(view)

    def _store(self, view: ServerView) -> bool:
        if view.owner is None:
            self._shared[view.name] = view
            return True
        self._overlays.setdefault(view.owner, {})[view.name] = view
        return False

    def _publish(self, touched_shared: bool) -> None:
        old = self.cell.current
        if touched_shared:
            tools, listing = index_tools(self._shared)
            servers: Mapping[str, ServerView] = dict(self._shared)
        else:
            tools, listing, servers = dict(old.tools), old.listing, old.servers
        overlays = {owner: dict(views) for owner, views in self._overlays.items()}
        self.cell._set(Catalog(old.epoch + 1, servers, tools, listing, overlays))
