"""The gateway as the admin API lists it (``web/listings.py``): its handshake-era
sessions and its metric families, both eras'."""

from __future__ import annotations

from supervisor.gateway.eras import NewEraHandler
from supervisor.gateway.gauges import gateway_families
from supervisor.gateway.http_sessions import GatewaySessions, session_item
from supervisor.runtime.metrics import Family
from supervisor.web.listings import Item


class GatewayListing:
    """``SessionListing`` over the gateway's sessions and its new-era handler."""

    def __init__(self, sessions: GatewaySessions, new_era: NewEraHandler | None) -> None:
        self.sessions = sessions
        self.new_era = new_era

    def session_items(self, scope: str | None) -> list[Item]:
        return [session_item(record) for record in self.sessions.listing(scope)]

    def families(self) -> list[Family]:
        return gateway_families(self.sessions, self.new_era)
