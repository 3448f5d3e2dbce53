"""Session ids that name their replica, and the mark of a request one replica forwards
to another (pure).

Behind a load balancer, a handshake-era session's requests should reach the replica
holding it, and the balancer sees nothing but headers: so a replica mints its session
ids as ``<replica>.<random>.<mac>`` and the balancer routes on the prefix
(``config/examples/nginx.conf``). The MAC (the shared keys, ``keys.py``) lets any
replica tell an id some replica minted from one a client made up, before it spends a
store read on it. A single process keeps its plain random ids.

A request a replica passes to the replica holding its session carries
``Mcp-Replica-Forwarded: <from>.<mac>``, the MAC over the sender and the session id:
the holder serves it and never passes it on again (no loops), and a client cannot
claim it came from a replica.
"""

from __future__ import annotations

import base64
import binascii
import secrets

from supervisor.cluster.keys import SharedKeys

FORWARDED_HEADER = "Mcp-Replica-Forwarded"
_ID_PURPOSE = b"mcp-session-id"
_FORWARD_PURPOSE = b"mcp-forwarded"
_MAC_BYTES = 12


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _mac_matches(keys: SharedKeys, payload: str, purpose: bytes, mac_text: str) -> bool:
    try:
        mac = base64.urlsafe_b64decode(mac_text + "=" * (-len(mac_text) % 4))
    except (binascii.Error, ValueError):
        return False
    return len(mac) == _MAC_BYTES and keys.verify(payload.encode(), purpose, mac, size=_MAC_BYTES)


class SessionIds:
    """Mints this replica's session ids and reads any replica's (``replica`` None: a
    single process, plain ids)."""

    def __init__(self, keys: SharedKeys, replica: str | None) -> None:
        self.keys = keys
        self.replica = replica

    def mint(self) -> str:
        if self.replica is None:
            return secrets.token_hex(8)
        payload = f"{self.replica}.{secrets.token_hex(12)}"
        return f"{payload}.{_b64(self.keys.mac(payload.encode(), _ID_PURPOSE)[:_MAC_BYTES])}"

    def replica_of(self, session_id: str) -> str | None:
        """The replica that minted ``session_id``; None for one no replica minted."""
        parts = session_id.split(".")
        if len(parts) != 3 or not all(parts):
            return None
        payload = f"{parts[0]}.{parts[1]}"
        return parts[0] if _mac_matches(self.keys, payload, _ID_PURPOSE, parts[2]) else None

    def forwarded_mark(self, session_id: str) -> str:
        """The ``Mcp-Replica-Forwarded`` value of a request this replica passes on."""
        sender = self.replica or "-"
        mac = self.keys.mac(f"{sender}|{session_id}".encode(), _FORWARD_PURPOSE)[:_MAC_BYTES]
        return f"{sender}.{_b64(mac)}"

    def forwarded_by(self, mark: str | None, session_id: str) -> str | None:
        """The replica that forwarded this request (``mark`` checked); None when it came
        from a client (no mark, or one no replica made)."""
        if mark is None or mark.count(".") != 1:
            return None
        sender, mac = mark.split(".")
        return sender if _mac_matches(self.keys, f"{sender}|{session_id}", _FORWARD_PURPOSE, mac) else None
