"""Exposure lists: which of its servers' tools, resources and prompts a catalog shows.

Why: trust decides whether a call may run, not whether a tool is seen; some audiences
must not see some tools at all (not in a listing, a search, the model's prompt). A
``Sieve`` holds the lists that apply to one audience (the supervisor picks them for a
tenant: ``supervisor/calls/exposure.py``), and ``sieved(catalog, sieve)`` is the catalog
as that audience sees it: the same epoch, the hidden items gone from every map, so
whatever reads the catalog (a turn's listings, its search, its lookups) cannot meet
them. The catalog keeps the sieve, so that a read of a URI nobody lists (a qualified
form, ``server=``, a template) is refused as well (``Catalog.shows_uri``).

Items are matched by the server's own name of them: a tool's name, a resource's URI, a
template's ``uriTemplate``, a prompt's name; globs are ``fnmatch``'s, case-sensitive
(``*`` crosses ``/``). An item is shown when every rule that covers its server admits
it: no ``deny`` glob of any matches it, and it matches the ``allow`` list of each rule
that has one (deny wins). Pure: no I/O, and no notion of who the audience is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any, Literal, TypeVar

import attrs
import rpds

from actors.router.catalog import Catalog, ServerView
from actors.router.surface_entries import ResourceEntry, TemplateEntry
from actors.router.uris import shown_uris

Kind = Literal["tools", "resources", "prompts"]
KINDS: tuple[Kind, ...] = ("tools", "resources", "prompts")


@attrs.frozen(slots=True)
class Lists:
    """One kind's globs: ``allow`` (None: every name) and ``deny``."""

    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()

    def admits(self, name: str) -> bool:
        """Whether ``name`` passes: no deny glob matches it, and an allow glob does."""
        if any(fnmatchcase(name, glob) for glob in self.deny):
            return False
        return self.allow is None or any(fnmatchcase(name, glob) for glob in self.allow)


EVERYTHING = Lists()


@attrs.frozen(slots=True)
class ServerRule:
    """One exposure entry as it applies to an audience: the servers it covers (a glob
    on the configured name) and its lists for each kind."""

    server: str = "*"
    tools: Lists = EVERYTHING
    resources: Lists = EVERYTHING
    prompts: Lists = EVERYTHING


@attrs.frozen(slots=True)
class Sieve:
    """The rules that apply to one audience (see the module docstring)."""

    rules: tuple[ServerRule, ...]
    _by_server: dict[str, tuple[ServerRule, ...]] = attrs.field(factory=dict, eq=False, repr=False)

    def of(self, server: str) -> tuple[ServerRule, ...]:
        """The rules that cover ``server`` (worked out once per server name)."""
        found = self._by_server.get(server)
        if found is None:
            found = self._by_server[server] = tuple(r for r in self.rules if fnmatchcase(server, r.server))
        return found

    def shows(self, server: str, kind: Kind, name: str) -> bool:
        """Whether ``server``'s item ``name`` of ``kind`` is shown."""
        return all(getattr(rule, kind).admits(name) for rule in self.of(server))


_Item = TypeVar("_Item")


def _kept(items: Iterable[_Item], rules: tuple[ServerRule, ...], kind: Kind, name: Any) -> tuple[_Item, ...]:
    return tuple(item for item in items if all(getattr(r, kind).admits(name(item)) for r in rules))


def sieved(catalog: Catalog, sieve: Sieve) -> Catalog:
    """``catalog`` as the audience of ``sieve`` sees it (a new catalog, the same epoch).

    Shown URIs are worked out again over the resources left: a URI that two servers
    publish is shown as it is to an audience that sees only one of them."""
    servers: dict[str, ServerView] = dict(catalog.servers)
    tools: Any = (
        catalog.tools if isinstance(catalog.tools, rpds.HashTrieMap) else rpds.HashTrieMap(catalog.tools)
    )
    for name, view in catalog.servers.items():
        rules = sieve.of(name)
        if not rules:
            continue
        entries = _kept(view.entries, rules, "tools", lambda e: e.name)
        shown = {entry.id for entry in entries}
        for entry in view.entries:
            if entry.id not in shown:
                tools = tools.discard(entry.id)
        servers[name] = attrs.evolve(
            view,
            entries=entries,
            resources=_kept(view.resources, rules, "resources", lambda r: r.uri),
            templates=_kept(view.templates, rules, "resources", lambda t: t.uri_template),
            prompts=_kept(view.prompts, rules, "prompts", lambda p: p.name),
            problems=_counted(view.problems),
        )
    prompts = {k: e for k, e in catalog.prompts.items() if sieve.shows(e.server, "prompts", e.name)}
    resources = _reshown(
        [e for e in catalog.resources.values() if sieve.shows(e.server, "resources", e.server_uri)],
        len(catalog.resources),
        lambda e: e.server_uri,
        lambda e, uri: attrs.evolve(e, uri=uri),
    )
    templates = _reshown(
        [e for e in catalog.templates.values() if sieve.shows(e.server, "resources", e.server_template)],
        len(catalog.templates),
        lambda e: e.server_template,
        lambda e, uri: attrs.evolve(e, uri_template=uri),
    )
    return Catalog(catalog.epoch, servers, tools, catalog.search_index, {}, prompts, resources, templates,
                   catalog.max_description_length, sieve)  # fmt: skip


def _counted(problems: tuple[str, ...]) -> tuple[str, ...]:
    """A server's problems as an audience its lists apply to sees them: counted, not
    quoted, since a problem may name an item the lists hide (the operator sees them)."""
    if not problems:
        return problems
    return (f"{len(problems)} problem(s) with what this server listed; the operator's view names them",)


_Entry = TypeVar("_Entry", ResourceEntry, TemplateEntry)


def _reshown(kept: list[_Entry], before: int, own: Any, shown_as: Any) -> Mapping[str, _Entry]:
    """The entries left, each under the form the URI rule gives it among them (as
    before when none is hidden)."""
    if len(kept) == before:
        return {_shown(entry): entry for entry in kept}
    shown = shown_uris((e.server, own(e)) for e in kept)
    mine: dict[str, _Entry] = {}
    for entry in kept:
        uri = shown[(entry.server, own(entry))]
        mine[uri] = entry if uri == _shown(entry) else shown_as(entry, uri)
    return mine


def _shown(entry: ResourceEntry | TemplateEntry) -> str:
    return entry.uri if isinstance(entry, ResourceEntry) else entry.uri_template
