"""Where a read, a prompt get or a completion goes: pure lookups in a frozen catalog.

A host names what it wants as the turn shows it (a shown URI, a prompt id); the
server knows it by its own name. These functions map the one to the other, or say
why they cannot (a ``CallError``: an envelope error code and a message that says what
to do). No Trio, no I/O: a catalog in, a target out.

A resource is reached by (server, server URI), found in this order:

1. a URI the turn shows (``Catalog.resources``), with ``server=`` naming the same
   server or none;
2. the qualified form ``mcp-supervisor://<server>/<uri>`` (``actors/router/uris.py``),
   which names its server, also for a URI the server did not list (one expanded from
   a template);
3. ``server=`` with the server's own URI (listed or not);
4. a URI no server listed, that the templates of exactly one server can produce
   (``{…}`` expressions matched loosely: any text).

Anything else is ``unknown_resource``; a URI that the templates of several servers
could produce says to name one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import attrs

from actors.router.catalog import Catalog
from actors.router.envelope import CallError
from actors.router.surface_entries import PromptEntry
from actors.router.uris import QUALIFIED_PREFIX, unqualify


@attrs.frozen(slots=True)
class ResourceTarget:
    """A resource as the server knows it (``server_uri``), and as the turn shows it."""

    server: str
    server_uri: str
    shown: str


def resource_target(catalog: Catalog, uri: str, server: str | None = None) -> ResourceTarget | CallError:
    """Where ``uri`` (as shown, qualified, or the server's own with ``server=``) is read."""
    listed = catalog.resources.get(uri)
    if listed is not None and server in (None, listed.server):
        return ResourceTarget(listed.server, listed.server_uri, listed.uri)
    qualified = unqualify(uri)
    if qualified is not None and server in (None, qualified[0]):
        return _on_server(catalog, qualified[0], qualified[1], uri)
    if server is not None:
        return _on_server(catalog, server, uri, _shown(catalog, server, uri))
    producers = [name for name, entries in _templates_by_server(catalog).items() if _produced(entries, uri)]
    if len(producers) == 1:
        return ResourceTarget(producers[0], uri, uri)
    if producers:
        names = ", ".join(producers)
        return CallError(
            "unknown_resource",
            f"resource {uri} may come from several servers ({names}): name one with server= "
            f"or read {QUALIFIED_PREFIX}<server>/{uri}",
        )
    return CallError("unknown_resource", f"unknown resource {uri}: no server of this turn publishes it")


def completion_target(catalog: Catalog, ref: Any) -> tuple[str, dict[str, Any], str] | CallError:
    """(server, the ref as the server knows it, the ref as shown) of a completion's
    ``ref``: ``{"type": "ref/prompt", "name": <prompt id>}`` or ``{"type":
    "ref/resource", "uri": <shown URI or template>}``."""
    kind = ref.get("type") if isinstance(ref, Mapping) else None
    if kind == "ref/prompt":
        name = ref.get("name")
        prompt = catalog.prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            return CallError("unknown_prompt", f"unknown prompt {name}: this turn does not show it")
        return prompt.server, {**ref, "name": prompt.name}, prompt.id
    if kind == "ref/resource":
        uri = ref.get("uri")
        if not isinstance(uri, str):
            return CallError(
                "invalid_arguments", "invalid arguments for completion: $.ref.uri: must be a string"
            )
        template = catalog.templates.get(uri)
        if template is not None:
            return template.server, {**ref, "uri": template.server_template}, uri
        target = resource_target(catalog, uri)
        if isinstance(target, CallError):
            return target
        return target.server, {**ref, "uri": target.server_uri}, target.shown
    return CallError(
        "invalid_arguments",
        'invalid arguments for completion: $.ref: must be {"type": "ref/prompt", "name": <prompt id>}'
        ' or {"type": "ref/resource", "uri": <uri>}',
    )


def prompt_problem(prompt: PromptEntry, arguments: Any) -> str | None:
    """Why ``arguments`` cannot go to ``prompts/get`` (MCP: an object of strings, the
    prompt's required ones present), or None."""
    if not isinstance(arguments, Mapping):
        return f"invalid arguments for {prompt.id}: $: must be an object"
    for key, value in arguments.items():
        if not isinstance(value, str):
            return f"invalid arguments for {prompt.id}: $.{key}: must be a string"
    missing = [name for name in prompt.required if name not in arguments]
    if missing:
        return f"invalid arguments for {prompt.id}: $.{missing[0]}: required"
    return None


def _on_server(catalog: Catalog, server: str, server_uri: str, shown: str) -> ResourceTarget | CallError:
    if server not in catalog.servers:
        return CallError("unknown_resource", f"unknown resource {shown}: no server {server} in this turn")
    return ResourceTarget(server, server_uri, shown)


def _shown(catalog: Catalog, server: str, server_uri: str) -> str:
    """How the turn shows ``server_uri`` of ``server`` (the URI itself when unlisted)."""
    for entry in catalog.resources.values():
        if entry.server == server and entry.server_uri == server_uri:
            return entry.uri
    return server_uri


def _templates_by_server(catalog: Catalog) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for entry in catalog.templates.values():
        found.setdefault(entry.server, []).append(entry.server_template)
    return found


def _produced(templates: list[str], uri: str) -> bool:
    return any(_template_pattern(template).fullmatch(uri) for template in templates)


@lru_cache(maxsize=1024)
def _template_pattern(template: str) -> re.Pattern[str]:
    """An RFC 6570 template as a loose regex: literal text as is, each ``{…}`` as any
    text (enough to tell which server's templates can produce a URI)."""
    parts = re.split(r"\{[^{}]*\}", template)
    return re.compile(".*?".join(re.escape(part) for part in parts), re.DOTALL)
