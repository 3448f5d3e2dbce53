"""The admin API: the REST routes of ``serve`` on Quart-Trio (the rest of the server
is ``server/``'s: the composition, Hypercorn, the mount table).

Its routes, bodies and roles are a contract with hosts and scripts: the route table
(``web/routes.py``) is served as ``/v1/openapi.json`` (``openapi.py``), and the
README's "Admin API" section describes it for users. Module map: ``app`` (the Quart
app and its error answers), ``handlers`` and ``surface_handlers`` (one method per
route), ``caller`` (what a handler knows of its request), ``bodies`` (request bodies),
``views`` (pure JSON shaping), ``sse`` (event streams), ``hosted`` (the sessions HTTP
clients open), ``openapi`` and ``schemas`` (the document).
"""

from supervisor.admin.app import create_app
from supervisor.admin.hosted import HostedSessions

__all__ = ["HostedSessions", "create_app"]
