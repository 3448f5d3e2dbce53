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

from supervisor.admin.app import create_app
from supervisor.admin.hosted import HostedSessions
from supervisor.admin.server import AdminBindError, listen_admin, serve_admin

__all__ = ["AdminBindError", "HostedSessions", "create_app", "listen_admin", "serve_admin"]
