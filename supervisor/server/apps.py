"""The composition of ``serve``'s apps, here and nowhere else.

One guard and one secret scrubber for every app; the gateway's sessions and new-era
handler, and its ``/mcp`` app; the bridge's hub and its ``/v1/bridge`` app; the admin
API given what it lists of them (``web/listings.py``); and one mount table in front
(``mounts.py``). Nothing here listens or runs: ``serving.py`` runs the lifetimes of
what is composed, and tests compose the same apps without a socket.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs
from quart_trio import QuartTrio

from supervisor.admin.app import create_app, routes_served
from supervisor.admin.hosted import HostedSessions
from supervisor.bridge.asgi_app import BRIDGE_PATH, BridgeApp
from supervisor.bridge.hub import BridgeHub
from supervisor.bridge.listing import HubListing
from supervisor.console.app import UI, ConsoleApp
from supervisor.gateway.http_app import McpApp
from supervisor.gateway.http_front import McpFront
from supervisor.gateway.http_rules import MCP_PATH
from supervisor.gateway.http_sessions import GatewaySessions, installed_version
from supervisor.gateway.listing import GatewayListing
from supervisor.gateway.notices import run_notices
from supervisor.gateway.stateless import StatelessGateway
from supervisor.server.mounts import Mounts
from supervisor.web.guard import Guard
from supervisor.web.scrubber import SecretScrubber

if TYPE_CHECKING:
    from supervisor.service import Supervisor


@attrs.frozen
class Apps:
    """What one ``serve`` is made of; ``app`` is the ASGI app Hypercorn runs."""

    guard: Guard
    hosted: HostedSessions
    gateway: GatewaySessions
    new_era: StatelessGateway
    bridge: BridgeHub
    admin: QuartTrio
    app: Mounts
    console: ConsoleApp


def compose(supervisor: Supervisor, *, bind_is_loopback: bool) -> Apps:
    """Every app of ``serve`` for ``supervisor``, wired."""
    scrubber = SecretScrubber(supervisor.config.secrets)
    guard = Guard(lambda: supervisor.config, bind_is_loopback=bind_is_loopback, scrubber=scrubber)
    guard.seen = supervisor.people.signed_in  # a person's token, for token exchange
    hosted = HostedSessions(supervisor)
    gateway = GatewaySessions(supervisor, scrub=scrubber.scrub)
    cell = supervisor.router.cell
    gateway.session_tasks.append(lambda record: run_notices(record.peer, record.outlet(), cell))
    new_era = StatelessGateway.of(supervisor, version=installed_version())
    bridge = BridgeHub(supervisor)
    admin = create_app(
        supervisor,
        hosted,
        guard=guard,
        gateway=GatewayListing(gateway, new_era),
        bridge=HubListing(bridge),
    )
    mcp = McpApp(McpFront(supervisor, gateway, new_era, scrubber.scrub), guard)
    console = ConsoleApp(admin, guard)  # a client of the API, in process
    app = Mounts({MCP_PATH: mcp, BRIDGE_PATH: BridgeApp(bridge, guard)}, admin, {UI: console})
    return Apps(guard, hosted, gateway, new_era, bridge, admin, app, console)


def served(apps: Apps) -> Mapping[tuple[str, str], str]:
    """(method, werkzeug rule) → operation of every route ``serve`` answers: the admin
    API's and each mounted app's (HEAD and OPTIONS aside)."""
    routes = dict(routes_served(apps.admin))
    for path, mounted in apps.app.mounts.items():
        routes.update({(method, path): operation for method, operation in mounted.served.items()})
    return routes
