"""What the admin API may read of the apps mounted beside it: read-only interfaces.

The admin API lists the gateway's sessions (``GET /v1/gateway/sessions``), the
bridge's sessions and dial-out peers (``/v1/bridge/sessions``, ``/v1/bridge/peers``)
and adds their metric families to ``/metrics``; it never imports them. ``server/``
hands it their implementations (``gateway/listing.py``, ``bridge/listing.py``); an
admin app built alone lists nothing of either (``NOTHING``).
"""

from __future__ import annotations

from typing import Any, Protocol

from supervisor.runtime.metrics import Family

Item = dict[str, Any]


class SessionListing(Protocol):
    """One app's open sessions, and its metric families."""

    def session_items(self, scope: str | None) -> list[Item]:
        """The sessions of tenant ``scope`` (None: every tenant's), as the API lists them."""

    def families(self) -> list[Family]:
        """The app's metric families for ``/metrics``."""


class BridgeListing(SessionListing, Protocol):
    """The bridge's: its sessions, and the dial-out peers registered with it."""

    def peer_items(self) -> list[Item]:
        """The peers, as ``GET /v1/bridge/peers`` lists them."""


class _Nothing:
    """No app mounted: nothing to list, no families."""

    def session_items(self, scope: str | None) -> list[Item]:
        return []

    def peer_items(self) -> list[Item]:
        return []

    def families(self) -> list[Family]:
        return []


NOTHING: BridgeListing = _Nothing()
