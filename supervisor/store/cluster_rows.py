"""The store's tables of replicas sharing it (store migration 12): ``replicas`` (one
heartbeat row each) and ``gateway_sessions`` (the handshake-era MCP sessions, each
naming the replica run holding it, with what a takeover restores).

Time is the database's clock (``expires_at``, ``heartbeat_at``), so hosts' clocks need
not agree. A replica is alive while its row's ``expires_at`` is ahead of that clock; a
session's owner is an *incarnation* (``replica:random``, new at each start), so a
replica restarted under the same id does not mistake its last run's sessions for its
own live ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from supervisor.store.store_rows import StoreRows


@attrs.frozen(slots=True)
class ReplicaRow:
    """One replica's heartbeat row, as read (``alive`` by the database's clock)."""

    id: str
    incarnation: str
    address: str | None
    state: str
    started_at: float
    heartbeat_at: float
    sessions: int
    in_flight: int
    config_digest: str
    alive: bool
    age_s: float
    """Seconds since its last heartbeat, by the database's clock."""


@attrs.frozen(slots=True)
class SessionRow:
    """One held (or handed-over) MCP session."""

    id: str
    tenant: str
    person: str | None
    owner: str | None
    state: str
    """JSON: what a takeover restores (``supervisor/cluster/session_state.py``)."""


_REPLICA_COLUMNS = (
    "id, incarnation, address, state, started_at, heartbeat_at, sessions, in_flight, config_digest"
)


class ClusterRows(StoreRows):
    """The ``replicas`` and ``gateway_sessions`` tables' methods of ``Store``."""

    # ---------------------------------------------------------------- replicas

    def beat(
        self,
        replica: str,
        incarnation: str,
        *,
        address: str | None,
        state: str,
        ttl_s: float,
        sessions: int = 0,
        in_flight: int = 0,
        config_digest: str = "",
    ) -> None:
        """Write this replica's heartbeat: alive for ``ttl_s`` from now (the database's now)."""
        now = self.dialect.words["now"]
        with self.transaction():
            self._connection.execute(
                f"INSERT INTO replicas ({_REPLICA_COLUMNS}, expires_at)"
                f" VALUES (?, ?, ?, ?, {now}, {now}, ?, ?, ?, {now} + ?)"
                " ON CONFLICT (id) DO UPDATE SET incarnation = excluded.incarnation,"
                " address = excluded.address, state = excluded.state,"
                " started_at = CASE WHEN replicas.incarnation = excluded.incarnation"
                " THEN replicas.started_at ELSE excluded.started_at END,"
                " heartbeat_at = excluded.heartbeat_at, sessions = excluded.sessions,"
                " in_flight = excluded.in_flight, config_digest = excluded.config_digest,"
                " expires_at = excluded.expires_at",
                (replica, incarnation, address, state, sessions, in_flight, config_digest, float(ttl_s)),
            )

    def replicas(self) -> list[ReplicaRow]:
        """Every replica's row, alive or not, by id."""
        now = self.dialect.words["now"]
        rows = self._read(
            f"SELECT {_REPLICA_COLUMNS}, expires_at > {now}, {now} - heartbeat_at FROM replicas ORDER BY id"
        )
        return [_replica(row) for row in rows]

    def replica_run(self, incarnation: str) -> ReplicaRow | None:
        """The row of the replica run ``incarnation``, if it is still that run's."""
        now = self.dialect.words["now"]
        rows = self._read(
            f"SELECT {_REPLICA_COLUMNS}, expires_at > {now}, {now} - heartbeat_at FROM replicas"
            " WHERE incarnation = ?",
            (incarnation,),
        )
        return _replica(rows[0]) if rows else None

    def forget_replica(self, incarnation: str) -> None:
        """Remove a run's heartbeat row (it stopped); a newer run's row stays."""
        with self.transaction():
            self._connection.execute("DELETE FROM replicas WHERE incarnation = ?", (incarnation,))

    # ---------------------------------------------------------------- sessions

    def save_session(
        self, session_id: str, tenant: str, person: str | None, owner: str, state: str, opened_at: float
    ) -> bool:
        """Write a session ``owner`` holds; False (nothing written) when another run
        took it over meanwhile."""
        now = self.dialect.words["now"]
        with self.transaction():
            done = self._connection.execute(
                "INSERT INTO gateway_sessions (id, tenant, person, owner, state, opened_at, updated_at)"
                f" VALUES (?, ?, ?, ?, ?, ?, {now}) ON CONFLICT (id) DO UPDATE"
                " SET state = excluded.state, updated_at = excluded.updated_at"
                " WHERE gateway_sessions.owner = excluded.owner",
                (session_id, tenant, person, owner, state, opened_at),
            )
            return bool(done.rowcount == 1)

    def session_row(self, session_id: str) -> SessionRow | None:
        rows = self._read(
            "SELECT id, tenant, person, owner, state FROM gateway_sessions WHERE id = ?", (session_id,)
        )
        return SessionRow(*rows[0]) if rows else None

    def take_session(self, session_id: str, owner: str, before: str | None) -> bool:
        """Make ``owner`` the session's holder if ``before`` still is; whether it is now."""
        with self.transaction():
            if before is None:
                done = self._connection.execute(
                    "UPDATE gateway_sessions SET owner = ? WHERE id = ? AND owner IS NULL",
                    (owner, session_id),
                )
            else:
                done = self._connection.execute(
                    "UPDATE gateway_sessions SET owner = ? WHERE id = ? AND owner = ?",
                    (owner, session_id, before),
                )
            return bool(done.rowcount == 1)

    def hand_over_sessions(self, owner: str, session_ids: Sequence[str] | None = None) -> int:
        """Release ``owner``'s sessions (all, or those named) for another replica to take."""
        with self.transaction():
            if session_ids is None:
                done = self._connection.execute(
                    "UPDATE gateway_sessions SET owner = NULL WHERE owner = ?", (owner,)
                )
                return int(done.rowcount)
            count = 0
            for session_id in session_ids:
                done = self._connection.execute(
                    "UPDATE gateway_sessions SET owner = NULL WHERE owner = ? AND id = ?", (owner, session_id)
                )
                count += int(done.rowcount)
            return count

    def end_session(self, session_id: str, owner: str) -> None:
        """The session ended (DELETE, idle expiry): its row goes, unless another run holds it."""
        with self.transaction():
            self._connection.execute(
                "DELETE FROM gateway_sessions WHERE id = ? AND (owner = ? OR owner IS NULL)",
                (session_id, owner),
            )


def _replica(row: Sequence[Any]) -> ReplicaRow:
    ident, run, address, state, started, beat, sessions, in_flight, digest, alive, age = row
    return ReplicaRow(
        str(ident), str(run), address, str(state), float(started), float(beat), int(sessions),
        int(in_flight), str(digest), alive=bool(alive), age_s=max(0.0, float(age)),
    )  # fmt: skip
