"""The surface beyond tools, folded into catalog entries: prompt ids, shown URIs, cut
descriptions.

A prompt's id is ``<server>_<prompt>`` by the tool rule (``naming.py``), from an id
book of its own, so a prompt and a tool may share a name. A resource or template is
shown by the URI rule (``uris.py``) over every server's ``(server, uri)`` pairs: one
server that starts or stops publishing a URI re-shows the other publishers' entries
of that URI, and nobody else's. An untrusted server's descriptions are cut like its
tools' (``trust.listing_description``), in the entry and in its ``raw`` item; the
rest of ``raw`` is handed on as sent.

``SurfaceBook`` keeps the shared servers' entries one server at a time: a listing
costs O(that server's surface plus the entries it re-shows). The catalog's three
maps (config order) are put together again from the per-server entries when some
server's surface changed, and reused as they are when none did (a tool-list change
or a state change leaves them alone).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from actors.connection.messages import ServerListed
from actors.protocol.messages import Prompt, Resource, ResourceTemplate, ServerFeatures, Tool
from actors.router.naming import IdBook, assign_ids
from actors.router.surface_entries import PromptEntry, ResourceEntry, TemplateEntry
from actors.router.trust import listing_description
from actors.router.uris import shown_uri, shown_uris
from actors.spec import ServerSpec

if TYPE_CHECKING:
    from actors.router.catalog import ServerView

_Item = TypeVar("_Item")

SurfaceMaps = tuple[Mapping[str, PromptEntry], Mapping[str, ResourceEntry], Mapping[str, TemplateEntry]]


@attrs.frozen(slots=True)
class Listed:
    """One listing's surface, repeated names and URIs dropped (the first one wins)."""

    resources: tuple[Resource, ...] = ()
    templates: tuple[ResourceTemplate, ...] = ()
    prompts: tuple[Prompt, ...] = ()
    features: ServerFeatures = attrs.field(factory=ServerFeatures)
    problems: tuple[str, ...] = ()

    @classmethod
    def of(cls, message: ServerListed) -> Listed:
        """The surface of ``message``, saying what was listed twice."""
        problems: list[str] = []
        server = message.server
        return cls(
            _first(message.resources, lambda r: r.uri, f"resource %r is listed twice by {server}", problems),
            _first(
                message.templates,
                lambda t: t.uri_template,
                f"template %r is listed twice by {server}",
                problems,
            ),
            _first(message.prompts, lambda p: p.name, f"prompt %r is listed twice by {server}", problems),
            message.features,
            tuple(problems),
        )

    def listing(self, server: str, generation: int, tools: tuple[Tool, ...]) -> ServerListed:
        """This surface with ``tools``, as one whole listing (what the store keeps)."""
        return ServerListed(
            server,
            generation,
            tools,
            resources=self.resources,
            templates=self.templates,
            prompts=self.prompts,
            features=self.features,
        )

    def onto(self, view: ServerView) -> ServerView:
        """``view`` showing this surface."""
        return attrs.evolve(
            view,
            resources=self.resources,
            templates=self.templates,
            prompts=self.prompts,
            features=self.features,
        )


def _first(
    items: Sequence[_Item], key: Callable[[_Item], str], problem: str, problems: list[str]
) -> tuple[_Item, ...]:
    seen: dict[str, _Item] = {}
    for item in items:
        name = key(item)
        if name in seen:
            problems.append(f"{problem % name}; the first one is kept")
        else:
            seen[name] = item
    return tuple(seen.values())


def same_items(a: ServerView, b: ServerView) -> bool:
    """Whether two server views list the same prompts, resources and templates (as sent)."""
    return a.prompts == b.prompts and a.resources == b.resources and a.templates == b.templates


def same_surface(a: ServerView, b: ServerView) -> bool:
    """Whether two server views show the same surface: items and features."""
    return a.features == b.features and same_items(a, b)


def _cut(raw: Mapping[str, Any], spec: ServerSpec, max_length: int) -> Mapping[str, Any]:
    """``raw`` with an untrusted server's long description cut (else ``raw`` itself)."""
    description = raw.get("description")
    if not isinstance(description, str):
        return raw
    listed = listing_description(description, trusted=spec.trusted, max_length=max_length)
    return raw if listed == description else {**raw, "description": listed}


@attrs.frozen(slots=True)
class ServerSurface:
    """One server's entries (prompt ids and shown URIs as the catalog shows them)."""

    prompts: tuple[PromptEntry, ...] = ()
    resources: tuple[ResourceEntry, ...] = ()
    templates: tuple[TemplateEntry, ...] = ()


def server_surface(
    view: ServerView,
    prompt_ids: Mapping[str, str],
    shown_resource: Callable[[str], str],
    shown_template: Callable[[str], str],
    max_length: int,
) -> ServerSurface:
    """``view``'s entries: ``prompt_ids`` maps prompt names to ids, ``shown_*`` map a
    server-side URI or template to its shown form."""
    spec, name = view.spec, view.name
    prompts = []
    for prompt in view.prompts:
        raw = _cut(prompt.raw, spec, max_length)
        description = raw.get("description")
        prompts.append(
            PromptEntry(
                prompt_ids[prompt.name],
                name,
                prompt.name,
                description if isinstance(description, str) else "",
                prompt.arguments,
                prompt.required,
                raw,
            )
        )
    return ServerSurface(
        tuple(prompts),
        tuple(
            ResourceEntry(shown_resource(r.uri), name, r.uri, r.name, _cut(r.raw, spec, max_length))
            for r in view.resources
        ),
        tuple(
            TemplateEntry(
                shown_template(t.uri_template), name, t.uri_template, t.name, _cut(t.raw, spec, max_length)
            )
            for t in view.templates
        ),
    )


class _ShownBook:
    """Who publishes each URI (or template), kept one server at a time."""

    __slots__ = ("_by_server", "_publishers")

    def __init__(self) -> None:
        self._publishers: dict[str, set[str]] = {}
        self._by_server: dict[str, tuple[str, ...]] = {}

    def shown(self, server: str, uri: str) -> str:
        return shown_uri(server, uri, len(self._publishers.get(uri, ())))

    def replace(self, server: str, uris: Iterable[str]) -> set[str]:
        """Set one server's URIs; return the *other* servers whose shown forms changed
        (a URI went from one publisher to several, or back)."""
        old, new = self._by_server.get(server, ()), tuple(uris)
        others: set[str] = set()
        for uri in set(old).symmetric_difference(new):
            group = self._publishers.setdefault(uri, set())
            before = len(group) > 1
            if uri in new:
                group.add(server)
            else:
                group.discard(server)
            if before != (len(group) > 1):
                others.update(group - {server})
            if not group:
                del self._publishers[uri]
        if new:
            self._by_server[server] = new
        else:
            self._by_server.pop(server, None)
        return others


class SurfaceBook:
    """The shared servers' surface entries (see the module docstring)."""

    def __init__(self) -> None:
        self._prompt_ids = IdBook()
        self._uris = _ShownBook()
        self._templates = _ShownBook()
        self._views: dict[str, ServerView] = {}
        self._surfaces: dict[str, ServerSurface] = {}
        self._maps: SurfaceMaps | None = None

    def put(self, view: ServerView, max_length: int) -> None:
        """Set one shared server's surface from its view (``view.prompts`` …), and
        re-show the entries of the servers that change with it."""
        name = view.name
        others = self._prompt_ids.replace(name, (p.name for p in view.prompts))
        others |= self._uris.replace(name, (r.uri for r in view.resources))
        others |= self._templates.replace(name, (t.uri_template for t in view.templates))
        self._views[name] = view
        for server in (name, *others):
            self._rebuild(server, max_length)
        self._maps = None

    def drop(self, name: str, max_length: int) -> None:
        """A shared server left: its entries go, the others it shared URIs with re-show."""
        view = self._views.get(name)
        if view is not None:
            self.put(attrs.evolve(view, prompts=(), resources=(), templates=()), max_length)
            del self._views[name], self._surfaces[name]

    def _rebuild(self, server: str, max_length: int) -> None:
        self._surfaces[server] = server_surface(
            self._views[server],
            self._prompt_ids.ids_of(server),
            lambda uri: self._uris.shown(server, uri),
            lambda template: self._templates.shown(server, template),
            max_length,
        )

    def maps(self, order: Iterable[str]) -> SurfaceMaps:
        """The catalog's prompts, resources and templates, servers in ``order``."""
        if self._maps is None:
            surfaces = [self._surfaces[name] for name in order if name in self._surfaces]
            self._maps = (
                {e.id: e for s in surfaces for e in s.prompts},
                {e.uri: e for s in surfaces for e in s.resources},
                {e.uri_template: e for s in surfaces for e in s.templates},
            )
        return self._maps


def overlay_maps(shared: SurfaceMaps, overlay: Iterable[ServerView], max_length: int) -> SurfaceMaps:
    """One session's maps: the shared ones plus its private servers' surface, the URI
    rule applied again over shared and private pairs (a private server that publishes
    a shared URI qualifies it for both). O(everything), once per session and epoch."""
    prompts, resources, templates = dict(shared[0]), shared[1], shared[2]
    private = list(overlay)
    resource_pairs = [(e.server, e.server_uri) for e in resources.values()]
    template_pairs = [(e.server, e.server_template) for e in templates.values()]
    for view in private:
        resource_pairs += [(view.name, r.uri) for r in view.resources]
        template_pairs += [(view.name, t.uri_template) for t in view.templates]
    shown_r, shown_t = shown_uris(resource_pairs), shown_uris(template_pairs)
    mine_r: dict[str, ResourceEntry] = {}
    for e in resources.values():
        uri = shown_r[(e.server, e.server_uri)]
        mine_r[uri] = e if uri == e.uri else attrs.evolve(e, uri=uri)
    mine_t: dict[str, TemplateEntry] = {}
    for t in templates.values():
        template = shown_t[(t.server, t.server_template)]
        mine_t[template] = t if template == t.uri_template else attrs.evolve(t, uri_template=template)
    for view in private:
        ids = assign_ids((view.name, p.name) for p in view.prompts)
        surface = server_surface(
            view,
            {name: ids[(view.name, name)] for _server, name in ids},
            functools.partial(_shown_in, shown_r, view.name),
            functools.partial(_shown_in, shown_t, view.name),
            max_length,
        )
        prompts.update((e.id, e) for e in surface.prompts)
        mine_r.update((e.uri, e) for e in surface.resources)
        mine_t.update((e.uri_template, e) for e in surface.templates)
    return prompts, mine_r, mine_t


def _shown_in(shown: Mapping[tuple[str, str], str], server: str, uri: str) -> str:
    return shown[(server, uri)]
