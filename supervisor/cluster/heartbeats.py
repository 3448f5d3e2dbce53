"""This replica's heartbeat row in the shared store, and what it learns from the others'.

Every ``heartbeat_s`` the replica writes its row (``replicas``: state, address, sessions,
calls in flight, config digest) alive for ``ttl_s`` by the database's clock, and reads
every row back: a live replica whose config digest differs from ours is warned about
once per (replica, digest), in the log and as a ``replica_config_differs`` event.

Its own connection, used in a worker thread of its own, one statement at a time: the
store actor's connection may be busy with a batch of audit rows, which must not hold a
heartbeat back past its TTL (other replicas would take this one's sessions over).
``fresh`` says the last successful beat is younger than the TTL: a replica that cannot
write its row must not act as a session's holder. A failed beat logs one warning per
outage and the next is tried on schedule; a clean stop removes the row.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from actors.broadcast import Broadcast
from actors.log_events import get_logger
from supervisor.cluster.digest import config_digest
from supervisor.cluster.replica import ReplicaIdentity
from supervisor.runtime.lifetimes import lifetime
from supervisor.runtime.logs import stamp_replica
from supervisor.runtime.metrics import Family, labels
from supervisor.settings.model import ClusterSettings, Config
from supervisor.store import Store
from supervisor.store.cluster_rows import ReplicaRow
from supervisor.store.errors import DB_ERRORS, StoreError
from supervisor.store.postgres import open_postgres

Offload = Callable[[Callable[[], Any]], Awaitable[Any]]
log = get_logger("supervisor.cluster")

DEFAULTS = ClusterSettings("", ())
"""The heartbeat and TTL of a shared store without a ``cluster`` section."""
STORE_ERRORS: tuple[type[Exception], ...] = (*DB_ERRORS, StoreError, OSError)
DIFFERS = "replica_config_differs"


class Heartbeats:
    """This replica's heartbeat (see the module docstring); ``run`` beats, ``stop`` says goodbye."""

    def __init__(
        self,
        replica: ReplicaIdentity,
        open_store: Callable[[], Store],
        *,
        digest: str,
        events: Broadcast[Mapping[str, Any]] | None = None,
        offload: Offload | None = None,
    ) -> None:
        cluster = replica.cluster or DEFAULTS
        self.replica = replica
        self.digest = digest
        self.heartbeat_s, self.ttl_s = cluster.heartbeat_s, cluster.ttl_s
        self.address: str | None = cluster.address
        """This replica's base URL for the others: ``cluster.address``, else the bound one."""
        self.sessions: Callable[[], int] = lambda: 0
        """How many sessions it holds (registered by what holds them)."""
        self.in_flight: Callable[[], int] = lambda: 0
        """How many requests it is answering (registered likewise)."""
        self.draining = False
        self.failures = 0
        self._open = open_store
        self._store: Store | None = None
        self._events = events
        self._limiter = trio.CapacityLimiter(1)
        self._offload = offload or functools.partial(
            trio.to_thread.run_sync, limiter=self._limiter, abandon_on_cancel=True
        )
        self._last_ok: float | None = None
        self._failing = False
        self._stopped = False
        self._warned: set[tuple[str, str]] = set()
        self._wake = trio.Event()
        self._drain_tried = trio.Event()  # a beat with state draining was tried

    @classmethod
    def of(
        cls, replica: ReplicaIdentity | None, config: Config, events: Broadcast[Mapping[str, Any]]
    ) -> Heartbeats | None:
        """The heartbeats of a replica on ``config.store.url`` (None: not a replica)."""
        url = config.store.url
        if replica is None or url is None:
            return None
        return cls(
            replica, functools.partial(open_postgres, url), digest=config_digest(config), events=events
        )

    @property
    def fresh(self) -> bool:
        """Whether a beat succeeded within the TTL (the row is surely still alive)."""
        return self._last_ok is not None and trio.current_time() - self._last_ok < self.ttl_s

    @property
    def state(self) -> str:
        return "draining" if self.draining else "serving"

    def set_address(self, url: str) -> None:
        """The bound URL, once ``serve`` listens: the address unless the config gave one."""
        cluster = self.replica.cluster
        if cluster is None or cluster.address is None:
            self.address = url.rstrip("/")
            self._wake.set()  # the others learn it now, not a heartbeat later

    def drain(self) -> None:
        """Stopping: readiness turns 503 and the row says ``draining`` (written at once)."""
        self.draining = True
        self._wake.set()

    async def drain_written(self) -> None:
        """``drain``, and wait (up to the TTL) for the beat that writes ``draining``."""
        self.drain()
        with trio.move_on_after(self.ttl_s):
            await self._drain_tried.wait()

    def unready(self) -> str | None:
        """Why this replica should get no new traffic (None: it should)."""
        if self.draining:
            return "draining: this replica is stopping"
        if self._last_ok is None:
            return "starting: no heartbeat written yet"
        if not self.fresh:
            age = trio.current_time() - self._last_ok
            return (
                f"heartbeat stale: none written for {age:.1f} s (ttl_s {self.ttl_s:g}); "
                "is the store (store.url) reachable?"
            )
        return None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Beat now, then every ``heartbeat_s`` (at once after ``drain``)."""
        await self._beat()
        task_status.started()
        while True:
            with trio.move_on_at(trio.current_time() + self.heartbeat_s):
                await self._wake.wait()
            self._wake = trio.Event()
            await self._beat()

    async def stop(self) -> None:
        """Remove this run's row (a clean stop: nobody waits for its TTL) and close."""

        self._stopped = True  # a beat queued behind the goodbye writes nothing

        def goodbye() -> None:
            if self._store is not None:
                store, self._store = self._store, None
                try:
                    store.forget_replica(self.replica.incarnation)
                finally:
                    store.close()

        try:
            await self._offload(goodbye)
        except STORE_ERRORS as exc:
            log.warning("heartbeat row not removed", extra={"fields": {"reason": str(exc)}})

    async def replicas(self) -> list[ReplicaRow]:
        """Every replica's row, read now."""
        rows: list[ReplicaRow] = await self._offload(lambda: self._connected().replicas())
        return rows

    async def run_of(self, incarnation: str) -> ReplicaRow | None:
        """The row of the replica run ``incarnation``, read now (None: it has none)."""
        row: ReplicaRow | None = await self._offload(lambda: self._connected().replica_run(incarnation))
        return row

    def families(self) -> list[Family]:
        """Its metric families for ``/metrics``."""
        age = -1.0 if self._last_ok is None else trio.current_time() - self._last_ok
        info = labels(replica=self.replica.id, incarnation=self.replica.incarnation)
        return [
            Family("mcp_supervisor_replica_info", "gauge", "This replica: its id and this run.", [(info, 1)]),
            Family(
                "mcp_supervisor_replica_heartbeat_age_seconds",
                "gauge",
                "Seconds since this replica last wrote its heartbeat (-1: never).",
                [("", round(age, 3))],
            ),
            Family(
                "mcp_supervisor_replica_heartbeat_failures_total",
                "counter",
                "Heartbeats that could not be written.",
                [("", self.failures)],
            ),
            Family(
                "mcp_supervisor_replica_draining", "gauge", "1 while it drains.", [("", int(self.draining))]
            ),
        ]

    def _connected(self) -> Store:
        if self._stopped:  # no connection opened after the goodbye, to be left open
            raise StoreError(f"replica {self.replica.id}: its heartbeats have stopped")
        if self._store is None:
            self._store = self._open()
        return self._store

    async def _beat(self) -> None:
        draining = self.draining  # a beat under way when the drain began writes serving
        try:
            await self._write_beat()
        finally:
            if draining:
                self._drain_tried.set()

    async def _write_beat(self) -> None:
        began = trio.current_time()
        sessions, in_flight, state = self.sessions(), self.in_flight(), self.state
        replica, address = self.replica, self.address

        def write() -> list[ReplicaRow]:
            if self._stopped:
                return []
            store = self._connected()
            store.beat(
                replica.id, replica.incarnation, address=address, state=state, ttl_s=self.ttl_s,
                sessions=sessions, in_flight=in_flight, config_digest=self.digest,
            )  # fmt: skip
            return store.replicas()

        if self._stopped:
            return
        try:
            rows: list[ReplicaRow] = await self._offload(write)
        except STORE_ERRORS as exc:
            self.failures += 1
            if not self._failing:
                self._failing = True
                fields = {"ttl_s": self.ttl_s, "reason": str(exc)}
                log.warning("heartbeat failed", extra={"fields": fields})
            return
        self._last_ok = began
        if self._failing:
            self._failing = False
            log.info("heartbeat restored", extra={"fields": {}})
        self._compare(rows)

    def _compare(self, rows: list[ReplicaRow]) -> None:
        """Warn once per (replica, digest) of a live replica whose config differs."""
        for row in rows:
            mismatch = row.alive and row.config_digest != self.digest
            if not mismatch or row.incarnation == self.replica.incarnation:
                continue
            if (row.id, row.config_digest) in self._warned:
                continue
            self._warned.add((row.id, row.config_digest))
            fields = {"peer": row.id, "peer_digest": row.config_digest, "config_digest": self.digest}
            log.warning("replica config differs", extra={"fields": fields})
            if self._events is not None:
                self._events.publish({"type": DIFFERS, **fields})


@asynccontextmanager
async def heartbeats_running(heartbeats: Heartbeats | None) -> AsyncIterator[None]:
    """The heartbeats for the block (nothing without them); log lines name the replica.
    At its end the row is removed."""
    if heartbeats is None:
        yield
        return
    stamp_replica(heartbeats.replica.id)
    try:
        async with lifetime(heartbeats.stop) as nursery:
            await nursery.start(heartbeats.run)
            yield
    finally:
        stamp_replica(None)


def replica_families(heartbeats: Heartbeats | None) -> list[Family]:
    """A replica's metric families (none for a single process: its ``/metrics`` stay as they were)."""
    return [] if heartbeats is None else heartbeats.families()
