"""The store's tables of new-era tenant states shared by replicas (store migration 13).

A 2026-07-28 client has no session, so behind a round-robin balancer its requests reach
every replica; each replica's ``TenantState`` of a (tenant, person) must show the same
activations and "for the session" approvals. Rows only grow while the state lives
(``INSERT … ON CONFLICT DO NOTHING``): two replicas adding at once never lose each
other's rows. A write that added rows announces the key with ``pg_notify`` at its
commit (``TENANT_CHANNEL``), for every replica to read it again
(``supervisor/gateway/tenant_sharing.py``).

``tenant_uses`` holds, per key, when a replica last used it (the database's clock);
the rows go when a replica's state expires and nobody used the key for the idle time.
Person ``''`` stands for none (a tenant's static token).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from supervisor.store.schema import SQLITE
from supervisor.store.store_rows import StoreRows

TENANT_CHANNEL = "mcp_tenant_state"
"""The ``pg_notify`` channel of tenant states; the payload is ``[tenant, person]``."""


@attrs.frozen(slots=True)
class SharedTenantState:
    """What the store holds of one key: activations in their order, and approvals."""

    activated: tuple[str, ...] = ()
    approvals: tuple[tuple[str, str, str], ...] = ()
    """(permission, fingerprint, action)."""


class TenantRows(StoreRows):
    """The ``tenant_*`` tables' methods of ``Store``."""

    def add_tenant_state(
        self,
        tenant: str,
        person: str | None,
        activated: Sequence[tuple[str, int]],
        approvals: Sequence[tuple[str, str, str]],
    ) -> int:
        """Add what the key's rows lack (kept rows stay as they are) and mark the key
        used; announce the key when rows were added. How many were added."""
        who, now = person or "", self.dialect.words["now"]
        added = 0
        with self.transaction():
            for tool, number in activated:
                done = self._connection.execute(
                    "INSERT INTO tenant_activations (tenant, person, tool, number, at)"
                    f" VALUES (?, ?, ?, ?, {now}) ON CONFLICT DO NOTHING",
                    (tenant, who, tool, number),
                )
                added += int(done.rowcount)
            for permission, fingerprint, action in approvals:
                done = self._connection.execute(
                    "INSERT INTO tenant_approvals (tenant, person, permission, fingerprint, action, at)"
                    f" VALUES (?, ?, ?, ?, ?, {now}) ON CONFLICT DO NOTHING",
                    (tenant, who, permission, fingerprint, action),
                )
                added += int(done.rowcount)
            self._use(tenant, who)
            if added and self.dialect is not SQLITE:
                payload = json.dumps([tenant, person])
                self._connection.execute("SELECT pg_notify(?, ?)", (TENANT_CHANNEL, payload))
        return added

    def tenant_state(self, tenant: str, person: str | None, *, use: bool = False) -> SharedTenantState:
        """The key's rows (activations by number); ``use``: mark the key used too."""
        who = person or ""
        if use:
            with self.transaction():
                self._use(tenant, who)
        tools = self._read(
            "SELECT tool FROM tenant_activations WHERE tenant = ? AND person = ? ORDER BY number, at, tool",
            (tenant, who),
        )
        approvals = self._read(
            "SELECT permission, fingerprint, action FROM tenant_approvals WHERE tenant = ? AND person = ?"
            " ORDER BY permission, fingerprint",
            (tenant, who),
        )
        return SharedTenantState(
            tuple(str(tool) for (tool,) in tools), tuple((str(p), str(f), str(a)) for p, f, a in approvals)
        )

    def use_tenant_state(self, tenant: str, person: str | None) -> None:
        """Mark the key used now (a replica answers its requests)."""
        with self.transaction():
            self._use(tenant, person or "")

    def end_tenant_state(self, tenant: str, person: str | None, idle_s: float) -> bool:
        """A replica's state of the key expired: its rows go if no replica used the key
        for ``idle_s``; whether they went."""
        who, now = person or "", self.dialect.words["now"]
        with self.transaction():
            done = self._connection.execute(
                f"DELETE FROM tenant_uses WHERE tenant = ? AND person = ? AND at < {now} - ?",
                (tenant, who, float(idle_s)),
            )
            if done.rowcount != 1:
                return False
            for table in ("tenant_activations", "tenant_approvals"):
                self._connection.execute(
                    f"DELETE FROM {table} WHERE tenant = ? AND person = ?", (tenant, who)
                )
            return True

    def listen_tenant_states(self) -> Any:
        """A connection of its own, listening on ``TENANT_CHANNEL`` (PostgreSQL only)."""
        return self._connection.listen(TENANT_CHANNEL)

    def _use(self, tenant: str, who: str) -> None:
        now = self.dialect.words["now"]
        self._connection.execute(
            f"INSERT INTO tenant_uses (tenant, person, at) VALUES (?, ?, {now})"
            " ON CONFLICT (tenant, person) DO UPDATE SET at = excluded.at",
            (tenant, who),
        )
