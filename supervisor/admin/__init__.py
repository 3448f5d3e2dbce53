"""The admin API: HTTP + SSE on Hypercorn, inside the supervisor's nursery.

Its routes, bodies and roles are a contract with hosts and scripts: ``openapi.py`` is
the one route table, served as ``/v1/openapi.json``, and the README's "Admin API"
section describes it for users.

``serve_admin`` runs it; ``create_app`` builds the Quart-Trio app; ``HostedSessions``
keeps the sessions HTTP clients open. Module map: ``auth`` (Host/Origin/token gates),
``roles`` (who may do what: the role check every route's action goes through),
``refusals`` (Hypercorn's own refusals as JSON),
``openapi`` (the route table and its document), ``handlers`` (one method per route),
``views`` (pure JSON shaping and secret scrubbing), ``sse`` (event streams),
``bodies`` (request bodies and API errors), ``hosted``, ``app``, ``server``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from supervisor.admin.app import create_app
    from supervisor.admin.hosted import HostedSessions
    from supervisor.admin.server import AdminBindError, listen_admin, serve_admin

# Loaded on first use (PEP 562), not here: the bridge and the gateway import the small
# modules of this package (``auth``, ``roles``), and an eager ``app`` import here would
# close a cycle through them (``tests/project/test_import_graph.py`` imports each module first).
_EXPORTS = {
    "create_app": "supervisor.admin.app",
    "HostedSessions": "supervisor.admin.hosted",
    "AdminBindError": "supervisor.admin.server",
    "listen_admin": "supervisor.admin.server",
    "serve_admin": "supervisor.admin.server",
}

__all__ = ["AdminBindError", "HostedSessions", "create_app", "listen_admin", "serve_admin"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
