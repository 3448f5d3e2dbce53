"""The bridge as the admin API lists it (``web/listings.py``): its sessions (local
and relayed), the dial-out peers registered with it, and its metric families."""

from __future__ import annotations

from supervisor.bridge.hub import BridgeHub
from supervisor.runtime.metrics import Family
from supervisor.web.listings import Item


class HubListing:
    """``BridgeListing`` over one hub."""

    def __init__(self, hub: BridgeHub) -> None:
        self.hub = hub

    def session_items(self, scope: str | None) -> list[Item]:
        return self.hub.listing(scope)

    def peer_items(self) -> list[Item]:
        return self.hub.peers.listing()

    def families(self) -> list[Family]:
        return self.hub.families()
