"""What a turn shows of a server's surface beyond tools: prompts, resources and
resource templates, each as the host sees it (a namespaced prompt id, a shown URI)
with what routing needs (the server and the name or URI the server knows).

Prompts are namespaced like tools (``<server>_<prompt>``, ``naming.py``); resources
and templates are shown by the URI rule of ``uris.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs


@attrs.frozen(slots=True)
class PromptEntry:
    """One prompt: ``id`` is ``<server>_<name>``; ``raw`` is the server's item as sent."""

    id: str
    server: str
    name: str
    description: str = ""
    arguments: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen(slots=True)
class ResourceEntry:
    """One resource: ``uri`` as shown (itself, or qualified), ``server_uri`` as the
    server knows it; ``raw`` as sent."""

    uri: str
    server: str
    server_uri: str
    name: str
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.frozen(slots=True)
class TemplateEntry:
    """One resource template: ``uri_template`` as shown, ``server_template`` as the
    server knows it; ``raw`` as sent."""

    uri_template: str
    server: str
    server_template: str
    name: str
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
