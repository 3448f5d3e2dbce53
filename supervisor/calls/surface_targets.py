"""Where a read, a prompt get or a completion goes, as the turn's envelope needs it.

The routing itself is ``actors/router/surface_lookup.py`` (the URI rule's reverse,
templates, prompt ids, completion refs: pure lookups in a frozen catalog). This
module adds what a turn's envelope and audit row need: how the turn *shows* what
was asked (the shown or qualified URI, the prompt id), and a refusal as a
``CallError`` (an envelope error code and a message that says what to do).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from actors.router.catalog import Catalog
from actors.router.envelope import CallError
from actors.router.surface_entries import PromptEntry
from actors.router.surface_lookup import SurfaceMiss, resolve_prompt, resolve_ref, resolve_uri


@attrs.frozen(slots=True)
class ResourceTarget:
    """A resource as the server knows it (``server_uri``), and as the turn shows it."""

    server: str
    server_uri: str
    shown: str


def resource_target(catalog: Catalog, uri: str, server: str | None = None) -> ResourceTarget | CallError:
    """Where ``uri`` (as shown, qualified, or the server's own with ``server=``) is read."""
    try:
        where, server_uri = resolve_uri(catalog, uri, server)
    except SurfaceMiss as miss:
        return CallError(miss.code, miss.message)
    return ResourceTarget(where, server_uri, _shown(catalog, where, server_uri, uri))


def prompt_target(catalog: Catalog, prompt_id: str) -> PromptEntry | CallError:
    """The prompt the turn shows under ``prompt_id``."""
    try:
        return resolve_prompt(catalog, prompt_id)
    except SurfaceMiss as miss:
        return CallError(miss.code, miss.message)


def completion_target(catalog: Catalog, ref: Any) -> tuple[str, dict[str, Any], str] | CallError:
    """(server, the ref as the server knows it, the ref as shown) of a completion's
    ``ref``: ``{"type": "ref/prompt", "name": <prompt id>}`` or ``{"type":
    "ref/resource", "uri": <shown URI or template>}``."""
    try:
        server, server_ref = resolve_ref(catalog, ref)
    except SurfaceMiss as miss:
        if miss.code == "invalid_arguments":
            return CallError(miss.code, f"invalid arguments for completion: $.ref: {miss.message}")
        return CallError(miss.code, miss.message)
    assert isinstance(ref, Mapping)  # resolve_ref refuses anything else
    return server, server_ref, str(ref.get("name") or ref.get("uri"))


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


def _shown(catalog: Catalog, server: str, server_uri: str, asked: str) -> str:
    """How the turn shows ``server_uri`` of ``server``: its listed form, else what was
    asked (a qualified form, or an unlisted URI such as one made from a template)."""
    for entry in catalog.resources.values():
        if entry.server == server and entry.server_uri == server_uri:
            return entry.uri
    return asked
