"""Catalog epochs: immutable views of every server and tool at one moment.

The router builds a new ``Catalog`` for every change it hears of (a tool list, a
state change) and never mutates an old one, so a turn that holds a catalog sees
exactly the tools, schemas, trust facts and states of the moment it started,
whatever happens next. The epoch number moves only when what a turn would see
changes (``same_for_turns``); a catalog that differs only in status (a retry's
attempt, an error, the exact state on the way up) keeps its predecessor's number.

Building costs O(the changed server), not O(all tools): the id index is a persistent
hash map (rpds-py's HAMT, structural sharing), the search index is sharded by server,
and the flat listing is computed lazily, once per epoch, only when somebody asks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import rpds
import trio

from actors.connection.messages import ConnectionMessage
from actors.connection.states import Availability, Phase, State, turn_availability
from actors.protocol.messages import Prompt, Resource, ResourceTemplate, ServerFeatures, Tool
from actors.router.risk import Risk, classify
from actors.router.schema_compiler import compile_schema
from actors.router.search import SearchIndex, index_server
from actors.router.subjects import declares_subject_arguments
from actors.router.surface import overlay_maps, same_surface
from actors.router.surface_entries import PromptEntry, ResourceEntry, TemplateEntry
from actors.router.trust import fingerprint, listing_description
from actors.router.validation import SchemaCheck
from actors.spec import ServerSpec

if TYPE_CHECKING:
    from actors.router.exposure import Sieve


@attrs.frozen(slots=True)
class ToolEntry:
    """One namespaced tool as the host and the model see it, with what policy needs."""

    id: str
    server: str
    name: str
    description: str
    input_schema: Mapping[str, Any]
    title: str | None = None
    annotations: Mapping[str, Any] | None = None
    listed_description: str = ""
    schema: SchemaCheck | None = attrs.field(default=None, eq=False, repr=False)
    fingerprint: str = ""
    risk: Risk | None = None
    # Its schema declares a path/URL-like argument: trust patterns look only at those.
    subject_arguments: bool = False
    output_schema: Mapping[str, Any] | None = None

    def schemas(self) -> dict[str, Any]:
        """``input_schema`` (and ``output_schema`` when the server declared one) as the
        server sent them, for every way a tool is handed on: never rewritten, ``$ref``
        never dereferenced, ``$schema`` and every other keyword kept."""
        if self.output_schema is None:
            return {"input_schema": dict(self.input_schema)}
        return {"input_schema": dict(self.input_schema), "output_schema": dict(self.output_schema)}


def make_entry(tool_id: str, server: ServerSpec, tool: Tool, max_description_length: int) -> ToolEntry:
    """A ToolEntry with its schema compiled (cached per schema) and its risk classified."""
    return ToolEntry(
        tool_id,
        server.name,
        tool.name,
        tool.description,
        tool.input_schema,
        tool.title,
        tool.annotations,
        listing_description(tool.description, trusted=server.trusted, max_length=max_description_length),
        compile_schema(tool.input_schema),
        fingerprint(tool.description, tool.input_schema),
        classify(tool.name, tool.description, tool.annotations),
        declares_subject_arguments(tool.input_schema),
        tool.output_schema,
    )


@attrs.frozen(slots=True)
class Transition:
    """One recent state change of a server, for status pages."""

    at: float
    state: State
    previous: State
    reason: str | None = None
    phase: Phase | None = None  # resolve … list: starting, reconnecting or relisting


MAX_TRANSITIONS = 20


@attrs.frozen(slots=True)
class ServerView:
    """One server at one epoch: its state and its last known tools.

    ``stale`` marks tools read from the store's cache (the server has not listed them
    in this run yet): searchable, callable (a call starts the server), maybe outdated.
    """

    name: str
    spec: ServerSpec
    mailbox: trio.MemorySendChannel[ConnectionMessage] = attrs.field(eq=False, repr=False)
    state: State = State.IDLE
    since: float = 0.0
    attempt: int = 0
    last_error: str | None = None
    last_error_at: float | None = None  # when ``last_error`` happened (Trio time)
    next_retry_at: float | None = None
    condition: str | None = None  # "needs_auth" or "crashed" (see StateChanged)
    phase: Phase | None = None  # "starting", "reconnecting" or "relisting" (see StateChanged)
    protocol_version: str | None = None  # the revision last negotiated (see StateChanged)
    available: bool = False
    generation: int = 0
    entries: tuple[ToolEntry, ...] = attrs.field(default=(), repr=False)
    problems: tuple[str, ...] = ()
    owner: str | None = None
    stale: bool = False
    transitions: tuple[Transition, ...] = ()
    reconnects: int = 0
    # The rest of its surface, as last listed (``ServerListed``): raw items, shown to
    # turns through the catalog's prompt ids and shown URIs.
    resources: tuple[Resource, ...] = attrs.field(default=(), repr=False)
    templates: tuple[ResourceTemplate, ...] = attrs.field(default=(), repr=False)
    prompts: tuple[Prompt, ...] = attrs.field(default=(), repr=False)
    features: ServerFeatures = attrs.field(factory=ServerFeatures)
    # What a turn frozen at this view may expect of the server while it lasts (from
    # ``state`` and ``phase``). Computed when the view is made, not on every call that
    # reads it: a view never changes, and ``attrs.evolve`` makes a new one.
    availability: Availability = attrs.field(init=False, eq=False, repr=False)

    @availability.default
    def _availability(self) -> Availability:
        return turn_availability(self.state, self.phase)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The server's own tool names, in its order."""
        return tuple(entry.name for entry in self.entries)

    @property
    def known(self) -> bool:
        """Whether any tool list (fresh or cached) is known for this server."""
        return self.generation > 0 or self.stale

    @property
    def cached_only(self) -> bool:
        """Its tools come from the store's cache: it has not listed them in this run."""
        return self.stale and self.generation == 0


def same_for_turns(a: ServerView, b: ServerView) -> bool:
    """Whether a turn would see no difference between two views of one server: the
    same tools (ids, descriptions, schemas), the same resources, templates, prompts
    and features (items as sent), availability as a turn sees it, cache flag, spec and
    mailbox. The rest (the exact state, attempts, errors, transitions)
    is status for operators: it changes without a new epoch."""
    return (
        (a.entries is b.entries or a.entries == b.entries)
        and a.availability is b.availability
        and a.cached_only == b.cached_only
        and a.mailbox is b.mailbox
        and (a.spec is b.spec or a.spec == b.spec)
        and same_surface(a, b)
    )


@attrs.frozen(slots=True, weakref_slot=False)
class Catalog:
    """Every server and tool at one epoch (shared servers, plus per-session overlays)."""

    epoch: int = 0
    servers: Mapping[str, ServerView] = attrs.field(factory=dict)
    tools: Mapping[str, ToolEntry] = attrs.field(factory=rpds.HashTrieMap)
    search_index: SearchIndex = attrs.field(factory=SearchIndex)
    overlays: Mapping[str, Mapping[str, ServerView]] = attrs.field(factory=dict)
    prompts: Mapping[str, PromptEntry] = attrs.field(factory=dict)
    """Prompt id (``<server>_<name>``) → entry, in config order."""
    resources: Mapping[str, ResourceEntry] = attrs.field(factory=dict)
    """Shown URI (``uris.py``) → entry, in config order."""
    templates: Mapping[str, TemplateEntry] = attrs.field(factory=dict)
    """Shown ``uriTemplate`` → entry, in config order."""
    max_description_length: int = 200
    """How long an untrusted server's listed descriptions may be (for overlays)."""
    sieve: Sieve | None = attrs.field(default=None, eq=False, repr=False)
    """The exposure lists this catalog was cut with (``exposure.sieved``), if any."""
    _listing: list[tuple[ToolEntry, ...]] = attrs.field(factory=list, eq=False, repr=False, alias="_listing")
    _views: dict[str, Catalog] = attrs.field(factory=dict, eq=False, repr=False, alias="_views")

    @property
    def listing(self) -> tuple[ToolEntry, ...]:
        """Every tool in config order (built on first use, then kept with this epoch)."""
        if not self._listing:
            self._listing.append(tuple(e for view in self.servers.values() for e in view.entries))
        return self._listing[0]

    def shows_uri(self, server: str, uri: str) -> bool:
        """Whether this catalog's audience may read ``uri`` of ``server`` (its exposure
        lists: also for a URI no server lists, such as one made from a template)."""
        return self.sieve is None or self.sieve.shows(server, "resources", uri)

    def view_for(self, *owners: str | None) -> Catalog:
        """This epoch as one session sees it: shared servers plus the overlays of
        ``owners`` (its person's connections of ``per_user`` servers, then its private
        ones), their surface included (``surface.overlay_maps``); built on first use,
        then kept with this epoch (the same object every time)."""
        if not self.overlays:  # nearly every turn: no session has a server of its own
            return self
        present = tuple(owner for owner in owners if owner is not None and self.overlays.get(owner))
        if not present:
            return self
        key = present[0] if len(present) == 1 else "\x00".join(present)
        mine = self._views.get(key)
        if mine is None:
            overlay: dict[str, ServerView] = {}
            for owner in present:
                overlay.update({name: self._over(view) for name, view in self.overlays[owner].items()})
            servers = {**self.servers, **overlay}
            tools: Any = self.tools
            index = self.search_index
            for view in overlay.values():
                tools = tools.update({entry.id: entry for entry in view.entries})
                index = index.with_server(shard_of(view))
            prompts, resources, templates = overlay_maps(
                (self.prompts, self.resources, self.templates), overlay.values(), self.max_description_length
            )
            mine = Catalog(self.epoch, servers, tools, index, {}, prompts, resources, templates,
                           self.max_description_length)  # fmt: skip
            self._views[key] = mine
        return mine

    def _over(self, view: ServerView) -> ServerView:
        """An overlay's view over the shared one of its name: a connection that has not
        listed yet (a person's own, of a ``per_user`` server) shows the server's last
        listing, marked stale, until it lists its own."""
        shared = self.servers.get(view.name)
        if view.known or shared is None or not shared.known:
            return view
        listed = attrs.evolve(view, entries=shared.entries, features=shared.features, stale=True)
        return attrs.evolve(
            listed, resources=shared.resources, templates=shared.templates, prompts=shared.prompts
        )


def shard_of(view: ServerView) -> Any:
    """The search shard of one server: id plus the full description of each tool."""
    return index_server(view.name, [(e.id, f"{e.id} {e.description}") for e in view.entries])


def replace_entries(
    tools: Mapping[str, ToolEntry], old: Iterable[ToolEntry], new: Iterable[ToolEntry]
) -> Mapping[str, ToolEntry]:
    """The id index with one server's entries swapped (O(changed · log n))."""
    assert isinstance(tools, rpds.HashTrieMap)
    index: Any = tools
    for entry in old:
        index = index.discard(entry.id)
    return index.update({entry.id: entry for entry in new})  # type: ignore[no-any-return]
