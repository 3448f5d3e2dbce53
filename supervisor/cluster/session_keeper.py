"""A replica's hold on its MCP sessions in the shared store.

The keeper has a PostgreSQL connection of its own, used from one worker thread at a
time: a session's save or takeover never waits behind the store actor's audit batch,
and never delays the replica's heartbeat (``heartbeats.py`` has its own too). Every
row it writes names this replica run (its incarnation) as the session's holder; a
write for a session another run took over meanwhile is refused by the database
(``cluster_rows.py``), so two holders never both persist one session.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

import trio

from supervisor.cluster.replica import ReplicaIdentity
from supervisor.store.cluster_rows import ReplicaRow, SessionRow

if TYPE_CHECKING:
    from supervisor.store import Store

T = TypeVar("T")


class SessionKeeper:
    """The ``gateway_sessions`` rows of this replica run (see the module docstring)."""

    def __init__(self, store: Store, identity: ReplicaIdentity) -> None:
        self._store = store
        self.me = identity.incarnation
        self._limiter = trio.CapacityLimiter(1)

    @classmethod
    @asynccontextmanager
    async def opened(cls, url: str, identity: ReplicaIdentity) -> AsyncIterator[SessionKeeper]:
        """A keeper on its own connection to the store at ``url``, closed at the end."""
        from supervisor.store.postgres import open_postgres

        store = await trio.to_thread.run_sync(open_postgres, url)
        try:
            yield cls(store, identity)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(store.close)

    async def _do(self, fn: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(fn, limiter=self._limiter)

    async def save(
        self, session_id: str, tenant: str, person: str | None, state: str, opened_at: float
    ) -> bool:
        """Write a session this run holds; False when another run took it over."""
        store = self._store
        return await self._do(
            functools.partial(store.save_session, session_id, tenant, person, self.me, state, opened_at)
        )

    async def row(self, session_id: str) -> SessionRow | None:
        return await self._do(functools.partial(self._store.session_row, session_id))

    async def take(self, session_id: str, before: str | None) -> bool:
        """Hold the session from now, if ``before`` (its holder as read) still does."""
        return await self._do(functools.partial(self._store.take_session, session_id, self.me, before))

    async def end(self, session_id: str) -> None:
        """The session ended here (DELETE, idle expiry): its row goes."""
        await self._do(functools.partial(self._store.end_session, session_id, self.me))

    async def hand_over(self, session_ids: Sequence[str] | None = None) -> int:
        """Release this run's sessions (all, or those named) for other replicas to take."""
        return await self._do(functools.partial(self._store.hand_over_sessions, self.me, session_ids))

    async def replica_run(self, incarnation: str) -> ReplicaRow | None:
        """The heartbeat row of a replica run, read now (None: that run is gone)."""
        return await self._do(functools.partial(self._store.replica_run, incarnation))

    async def replicas(self) -> list[ReplicaRow]:
        """Every replica's heartbeat row, read now."""
        return await self._do(self._store.replicas)
