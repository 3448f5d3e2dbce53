"""RouterActor: the one owner of the catalog.

Connection actors publish ``ServerListed`` and ``StateChanged`` into the router's
mailbox; the router folds them into a new immutable ``Catalog`` and makes it current
in a ``CatalogCell``. Messages that arrive together are folded into one catalog. Its
epoch number moves only when what a turn would see changed (tools, availability as a
turn sees it, descriptions: ``catalog.same_for_turns``), so a restart moves it twice
(down, up) and a server that keeps failing its retries not at all; every catalog is
still published, since status pages read the states from it.
A listing's resources, templates and prompts become the catalog's prompt ids and
shown URIs (``surface.py``), and move the epoch only when they change.
Turns read the cell's current catalog (a reference to a frozen object: nothing is
shared that anybody can change) and may wait for the next epoch.

A change costs O(the changed server): ids come from an ``IdBook``, the id index is a
persistent map, and the search index is sharded by server.

Shared servers can join (``AddServer``) and leave (``RemoveServer``) while the router
runs; a server that left takes its tools out of the catalog, and a late message of
its actor is dropped; a config reload changes their specs (``RetuneServers``). A
``per_user`` server is shared with no connection of its own: each person's connection
is an overlay of theirs, and the last listing any of them made is the server's. The
router ends when its mailbox closes, or at ``StopRouter``,
after folding everything that was sent before it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from actors.broadcast import Broadcast
from actors.connection.messages import ConnectionMessage, Published, ServerListed
from actors.connection.states import is_available, is_reconnect
from actors.log_events import get_logger
from actors.mailbox import queued
from actors.protocol.era import Era
from actors.protocol.messages import Tool
from actors.router.catalog import (
    MAX_TRANSITIONS,
    Catalog,
    ServerView,
    Transition,
    replace_entries,
    same_for_turns,
    shard_of,
)
from actors.router.naming import IdBook, assign_ids
from actors.router.surface import Listed, SurfaceBook, same_items
from actors.router.tool_entries import entries_for, unique_tools
from actors.router.trust import listing_description
from actors.spec import Credentials, ServerSpec

log = get_logger("actors.router")

Mailbox = trio.MemorySendChannel[ConnectionMessage]

ListingSink = Callable[[ServerListed], object]
"""Told each shared server's listing as the catalog took it (the store keeps it)."""
EraSink = Callable[[str, Era | None], object]
"""Told the era a shared server's actor remembers, at each of its state changes."""


@attrs.frozen(slots=True, eq=False)
class RegisterServer:
    """A connection actor exists for ``spec`` (owner: the session of a private one)."""

    spec: ServerSpec
    mailbox: Mailbox
    owner: str


@attrs.frozen(slots=True)
class DropOwner:
    """A session ended: forget its private servers."""

    owner: str


@attrs.frozen(slots=True, eq=False)
class AddServer:
    """A shared server joins while the router runs; ``cached``: its last known listing
    (from the store), shown stale until it lists its own."""

    spec: ServerSpec
    mailbox: Mailbox
    cached: ServerListed | None = None


@attrs.frozen(slots=True)
class RemoveServer:
    """A shared server leaves (its connection actor has ended): forget it and its tools."""

    name: str


@attrs.frozen(slots=True)
class RetuneServers:
    """A config reload changed shared servers' settings (``specs``: their new specs,
    same launch keys) and the listing length of untrusted descriptions: listings and
    envelopes follow from the next epoch on; tool ids and states stay."""

    specs: tuple[ServerSpec, ...]
    max_description_length: int
    refresh: bool = False
    """What turns see changed beyond the catalog (a tenant's exposure lists): a new
    epoch all the same."""


@attrs.frozen(slots=True)
class StopRouter:
    """Fold and publish what was sent before this, then end."""


_Folded = Published | RegisterServer | DropOwner | AddServer | RemoveServer | RetuneServers
RouterMessage = _Folded | StopRouter


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


class RouterActor:
    """Owns the catalog; see the module docstring."""

    def __init__(
        self,
        servers: Sequence[tuple[ServerSpec, Mailbox]],
        mailbox: trio.MemoryReceiveChannel[RouterMessage],
        *,
        cached: Mapping[str, ServerListed] | None = None,
        max_description_length: int = 200,
        listing_sink: ListingSink | None = None,
        era_sink: EraSink | None = None,
        events: Broadcast[Mapping[str, Any]] | None = None,
    ) -> None:
        self._mailbox = mailbox
        self._era_sink = era_sink
        self._events = events
        self._max_description = max_description_length
        self._sink = listing_sink
        self._book = IdBook()
        self._surface = SurfaceBook()  # prompts, resources, templates: see surface.py
        self._shared: dict[str, ServerView] = {}
        self._overlays: dict[str, dict[str, ServerView]] = {}
        # Whose turns would see a change since the last epoch (None: the shared servers').
        self._changed_for: set[str | None] = set()
        catalog = Catalog(0)
        self._tools, self._index = catalog.tools, catalog.search_index
        for spec, channel in servers:
            self._add(spec, channel, (cached or {}).get(spec.name))
        self.cell = CatalogCell(self._catalog(1, dict(self._shared), {}))
        self._changed_for.clear()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fold messages into epochs until the mailbox closes."""
        task_status.started()
        # Closing the receive end when the router ends makes late publishers fail fast
        # instead of blocking on a full mailbox nobody reads.
        async with self._mailbox:
            await self._fold()

    async def _fold(self) -> None:
        async for message in self._mailbox:
            if isinstance(message, StopRouter):
                return
            touched_shared = self._apply(message)
            stop = False
            for more in queued(self._mailbox):  # whatever else is queued joins this epoch
                if isinstance(more, StopRouter):
                    stop = True
                    break
                touched_shared = self._apply(more) or touched_shared
            self._publish(touched_shared)
            if stop:
                return

    def _add(self, spec: ServerSpec, mailbox: Mailbox, cached: ServerListed | None) -> bool:
        """A shared server joins (a name taken already is refused, loudly), its cache stale."""
        if spec.name in self._shared:
            log.warning("server %s is supervised already; adding it again is ignored", spec.name)
            return False
        self._shared[spec.name] = view = ServerView(spec.name, spec, mailbox)
        self._changed_for.add(None)
        if cached is not None:
            self._set_tools(view, unique_tools(spec.name, cached.tools)[0], (), stale=True)
            self._set_surface(self._shared[spec.name], Listed.of(cached))
        return True

    def _remove(self, name: str) -> bool:
        """A shared server leaves: its ids, id-index entries and search shard go."""
        view = self._shared.pop(name, None)
        if view is None:
            return False
        self._changed_for.add(None)
        self._surface.drop(name, self._max_description)
        others = self._book.replace(name, ())
        self._tools = replace_entries(self._tools, view.entries, ())
        self._index = self._index.without_server(name)
        for other in others:  # a collision it caused is gone: their ids change back
            self._renumber(self._shared[other])
        return True

    def _retune(self, message: RetuneServers) -> bool:
        """New specs for shared servers; listed descriptions redone where trust or the
        length limit changed (same ids, same search shards)."""
        wider = message.max_description_length != self._max_description
        if message.refresh:
            self._changed_for.add(None)
        self._max_description = message.max_description_length
        retuned = {spec.name: spec for spec in message.specs if spec.name in self._shared}
        for name, view in list(self._shared.items()):
            spec = retuned.get(name, view.spec)
            redo = spec.trusted != view.spec.trusted or wider
            if redo:
                entries = tuple(
                    attrs.evolve(e, listed_description=self._listed(e.description, spec))
                    for e in view.entries
                )
                self._tools = replace_entries(self._tools, view.entries, entries)
                view = attrs.evolve(view, entries=entries)
            view = attrs.evolve(view, spec=spec)
            if redo:
                self._surface.put(view, self._max_description)
            self._put(self._shared, view, None)
        return True

    def _listed(self, description: str, spec: ServerSpec) -> str:
        return listing_description(description, trusted=spec.trusted, max_length=self._max_description)

    def _apply(self, message: _Folded) -> bool:
        """Fold one message in; True when a shared server changed."""
        if isinstance(message, AddServer):
            return self._add(message.spec, message.mailbox, message.cached)
        if isinstance(message, RemoveServer):
            return self._remove(message.name)
        if isinstance(message, RetuneServers):
            return self._retune(message)
        if isinstance(message, RegisterServer):
            view = ServerView(message.spec.name, message.spec, message.mailbox, owner=message.owner)
            self._overlays.setdefault(message.owner, {})[view.name] = view
            self._changed_for.add(message.owner)
            return False
        if isinstance(message, DropOwner):
            self._overlays.pop(message.owner, None)
            return False
        views = self._overlays.get(message.owner, {}) if message.owner else self._shared
        previous = views.get(message.server)
        if previous is None:
            log.warning("message for unknown server %s dropped", message.server)
            return False
        if isinstance(message, ServerListed):
            tools, duplicates = unique_tools(message.server, message.tools)
            surface = Listed.of(message)
            problems = message.problems + duplicates + surface.problems
            if message.owner:
                view = self._private_view(previous, message.generation, tools, problems)
                self._put(views, surface.onto(view), message.owner)
                shared = self._shared.get(message.server)
                if shared is None or shared.spec.credentials is not Credentials.PER_USER:
                    return False
                previous = shared  # a person's listing is the server's too: the last one shows
            self._set_tools(previous, tools, problems, generation=message.generation)
            self._set_surface(self._shared[message.server], surface)
            if self._sink is not None:
                self._sink(surface.listing(message.server, message.generation, tools))
            return True
        view = attrs.evolve(
            previous,
            state=message.state,
            since=message.at,
            attempt=message.attempt,
            last_error=message.reason if message.reason else previous.last_error,
            last_error_at=message.at if message.reason else previous.last_error_at,
            next_retry_at=message.next_retry_at,
            condition=message.condition,
            phase=message.phase,
            protocol_version=message.protocol_version or previous.protocol_version,
            available=is_available(message.state, message.phase),
            reconnects=previous.reconnects + is_reconnect(message.previous, message.state),
            transitions=(
                *previous.transitions[-(MAX_TRANSITIONS - 1) :],
                Transition(message.at, message.state, message.previous, message.reason, message.phase),
            ),
        )
        self._put(views, view, message.owner)
        if self._era_sink is not None and not message.owner:
            self._era_sink(message.server, message.era)
        if self._events is not None and not message.owner:
            self._events.publish(
                {
                    "type": "state",
                    "server": message.server,
                    "state": message.state.value,
                    "previous": message.previous.value,
                    "attempt": message.attempt,
                    "reason": message.reason,
                    "condition": message.condition,
                    "phase": None if message.phase is None else message.phase.value,
                    "next_retry_in_s": None
                    if message.next_retry_at is None
                    else round(max(0.0, message.next_retry_at - message.at), 3),
                }
            )
        return not message.owner

    def _set_tools(
        self,
        previous: ServerView,
        tools: tuple[Tool, ...],
        problems: tuple[str, ...],
        *,
        generation: int = 0,
        stale: bool = False,
    ) -> None:
        """Swap one shared server's tools into the id index and the search index."""
        name = previous.name
        others = self._book.replace(name, (t.name for t in tools))
        ids = self._book.ids_of(name)
        entries = entries_for(previous, tools, ids, self._max_description)
        view = attrs.evolve(previous, entries=entries, problems=problems, generation=generation, stale=stale)
        if entries is not previous.entries:
            self._tools = replace_entries(self._tools, previous.entries, entries)
            self._index = self._index.with_server(shard_of(view))
        self._put(self._shared, view, None)
        for other in others:  # a collision renamed some of another server's tools
            self._renumber(self._shared[other])

    def _set_surface(self, previous: ServerView, surface: Listed) -> None:
        """Swap one shared server's resources, templates and prompts in (their entries
        are redone only when they changed)."""
        view = surface.onto(previous)
        if not same_items(previous, view):  # features alone change no entry
            self._surface.put(view, self._max_description)
        self._put(self._shared, view, None)

    def _renumber(self, view: ServerView) -> None:
        ids = self._book.ids_of(view.name)
        entries = tuple(attrs.evolve(e, id=ids[e.name]) for e in view.entries)
        self._tools = replace_entries(self._tools, view.entries, entries)
        renamed = attrs.evolve(view, entries=entries)
        self._put(self._shared, renamed, None)
        self._index = self._index.with_server(shard_of(renamed))

    def _private_view(
        self, previous: ServerView, generation: int, tools: tuple[Tool, ...], problems: tuple[str, ...]
    ) -> ServerView:
        ids = assign_ids((previous.name, t.name) for t in tools)
        mine = {t.name: ids[(previous.name, t.name)] for t in tools}
        entries = entries_for(previous, tools, mine, self._max_description)
        return attrs.evolve(previous, entries=entries, problems=problems, generation=generation)

    def _put(self, views: dict[str, ServerView], view: ServerView, owner: str | None) -> None:
        """Store a server's new view, noting whose turns would see the difference."""
        previous = views.get(view.name)
        views[view.name] = view
        if previous is None or not same_for_turns(previous, view):
            self._changed_for.add(owner)

    def _publish(self, touched_shared: bool) -> None:
        old = self.cell.current
        servers: Mapping[str, ServerView] = dict(self._shared) if touched_shared else old.servers
        overlays = {owner: dict(views) for owner, views in self._overlays.items()}
        changed, self._changed_for = self._changed_for, set()
        epoch = old.epoch + 1 if changed else old.epoch  # status alone keeps the number
        self.cell._set(self._catalog(epoch, servers, overlays))
        if self._events is not None and None in changed:
            self._events.publish({"type": "epoch", "epoch": epoch, "tools": len(self._tools)})

    def _catalog(
        self, epoch: int, servers: Mapping[str, ServerView], overlays: Mapping[str, Mapping[str, ServerView]]
    ) -> Catalog:
        prompts, resources, templates = self._surface.maps(self._shared)
        return Catalog(epoch, servers, self._tools, self._index, overlays, prompts, resources, templates,
                       self._max_description)  # fmt: skip
