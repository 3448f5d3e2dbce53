"""Where a host's resource URI, prompt id or completion ref goes: pure lookups in one
catalog (a turn's, as its session sees it: ``Catalog.view_for``).

A URI is read from one server, as ``(server, server_uri)``:

- ``server=`` given: that server, with the URI as the host wrote it, or as it is
  shown (a shown or qualified form of that server is taken back to the server's own);
- a shown URI (``catalog.resources``): its server;
- a qualified form (``mcp-supervisor://<server>/<uri>``): that server, listed or not;
- a plain URI that several servers publish: refused, naming them and the forms to
  read instead;
- a URI nobody lists that one server's resource template describes
  (``uri_templates.py``): that server; several: refused, naming them;
- whichever way it was reached, a URI the catalog's exposure lists hide
  (``Catalog.shows_uri``): refused as a URI no server lists.

Every refusal is a ``SurfaceMiss`` with an envelope code and a message that says
what to do instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from actors.router.catalog import Catalog
from actors.router.surface_entries import PromptEntry
from actors.router.uri_templates import matches
from actors.router.uris import qualify, unqualify


class SurfaceMiss(Exception):
    """A lookup that cannot be routed: ``code`` for the envelope, ``message`` for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _names(servers: Iterable[str]) -> str:
    servers = list(servers)
    return ", ".join(servers[:-1]) + f" and {servers[-1]}" if len(servers) > 1 else "".join(servers)


def _known(catalog: Catalog, server: str, shown: str) -> str:
    if server not in catalog.servers:
        raise SurfaceMiss(
            "unknown_resource", f"unknown resource {shown}: this turn shows no server {server!r}"
        )
    return server


def resolve_uri(catalog: Catalog, uri: str, server: str | None = None) -> tuple[str, str]:
    """``(server, server_uri)`` to read ``uri`` from (see the module docstring)."""
    where, server_uri = _route_uri(catalog, uri, server)
    if not catalog.shows_uri(where, server_uri):
        raise _unknown(uri)
    return where, server_uri


def _unknown(uri: str) -> SurfaceMiss:
    return SurfaceMiss(
        "unknown_resource",
        f"unknown resource {uri}: no server in this turn lists it or has a template it matches; "
        "list the resources, or pass server= to ask one server directly",
    )


def _route_uri(catalog: Catalog, uri: str, server: str | None) -> tuple[str, str]:
    entry = catalog.resources.get(uri)
    if server is not None:
        _known(catalog, server, uri)
        if entry is not None and entry.server == server:  # as shown
            return server, entry.server_uri
        pair = unqualify(uri)
        if pair is None or qualify(server, uri) in catalog.resources:  # as the server has it
            return server, uri
        if pair[0] == server:  # qualified, not listed
            return server, pair[1]
        raise SurfaceMiss(
            "invalid_arguments",
            f"resource {uri} names server {pair[0]!r} but server= says {server!r}: "
            "pass the server's own URI with server=, or the qualified form alone",
        )
    if entry is not None:
        return entry.server, entry.server_uri
    pair = unqualify(uri)
    if pair is not None:
        return _known(catalog, pair[0], uri), pair[1]
    publishers = [name for name in catalog.servers if qualify(name, uri) in catalog.resources]
    if publishers:
        forms = " or ".join(qualify(name, uri) for name in publishers)
        raise SurfaceMiss(
            "unknown_resource",
            f"resource {uri} is published by {_names(publishers)}: read {forms}, or pass server=",
        )
    by_template = list(
        dict.fromkeys(t.server for t in catalog.templates.values() if matches(t.server_template, uri))
    )
    if len(by_template) == 1:
        return by_template[0], uri
    if by_template:
        raise SurfaceMiss(
            "unknown_resource",
            f"resource {uri} is not listed and matches templates of {_names(by_template)}: "
            f"pass server=, or read {qualify(by_template[0], uri)}",
        )
    raise _unknown(uri)


def resolve_prompt(catalog: Catalog, prompt_id: str) -> PromptEntry:
    """The prompt a turn shows under ``prompt_id``."""
    entry = catalog.prompts.get(prompt_id)
    if entry is None:
        raise SurfaceMiss(
            "unknown_prompt",
            f"unknown prompt {prompt_id}: this turn shows no such prompt; list the prompts for their ids",
        )
    return entry


def resolve_ref(catalog: Catalog, ref: Any) -> tuple[str, dict[str, Any]]:
    """``(server, ref as the server knows it)`` for a completion ref: ``{"type":
    "ref/prompt", "name": <prompt id>}`` or ``{"type": "ref/resource", "uri": <shown
    template or URI, or a qualified form>}``."""
    kind = ref.get("type") if isinstance(ref, Mapping) else None
    if kind == "ref/prompt" and isinstance(ref.get("name"), str):
        entry = resolve_prompt(catalog, ref["name"])
        return entry.server, {**ref, "name": entry.name}
    if kind == "ref/resource" and isinstance(ref.get("uri"), str):
        uri = ref["uri"]
        template = catalog.templates.get(uri)
        if template is not None:
            return template.server, {**ref, "uri": template.server_template}
        resource = catalog.resources.get(uri)
        if resource is not None:
            return resource.server, {**ref, "uri": resource.server_uri}
        pair = unqualify(uri)
        if pair is not None and catalog.shows_uri(pair[0], pair[1]):
            return _known(catalog, pair[0], uri), {**ref, "uri": pair[1]}
        publishers = [name for name in catalog.servers if qualify(name, uri) in catalog.templates]
        if publishers:
            forms = " or ".join(qualify(name, uri) for name in publishers)
            raise SurfaceMiss(
                "unknown_resource", f"template {uri} is published by {_names(publishers)}: complete {forms}"
            )
        raise SurfaceMiss(
            "unknown_resource",
            f"unknown resource template {uri}: this turn lists no such template; list the resources",
        )
    raise SurfaceMiss(
        "invalid_arguments",
        'a completion ref is {"type": "ref/prompt", "name": <prompt id>} or '
        '{"type": "ref/resource", "uri": <template>}',
    )
