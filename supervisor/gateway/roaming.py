"""Handshake-era gateway sessions that outlive their replica: kept in the shared store
and taken over by another replica when theirs is gone.

With a ``cluster`` section, each session's restorable state (``cluster/session_state.py``)
is written to the store when it is opened and again whenever a request changed it (an
activation, a "for the session" approval, a log level, a listing shown), before that
request's answer goes out: what the client was told is what a takeover restores.

A request for a session this replica does not hold (``find``):

- an id no replica minted, or another tenant's: unknown (404), as today;
- held by a live replica run: the front passes the request on to it (``Elsewhere``);
- held by a run whose heartbeat expired, or handed over by a drain: this replica takes
  it (one taker wins, by the database), restores it, and answers. The client does not
  initialize again. If the holder's heartbeat is still fresh but it does not answer
  (killed a moment ago), ``wait_gone`` waits at most the TTL for the heartbeat to
  expire, then the takeover goes on.

A session that ends here (``DELETE``, idle expiry) loses its row; one a drain hands
over keeps it, holder-less, for the next replica its client reaches.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import trio

from actors.log_events import get_logger
from supervisor.cluster.keys import SharedKeys
from supervisor.cluster.session_ids import SessionIds
from supervisor.cluster.session_keeper import SessionKeeper
from supervisor.cluster.session_state import SessionState
from supervisor.gateway.session_restore import fingerprint, snapshot
from supervisor.store.cluster_rows import ReplicaRow

if TYPE_CHECKING:
    from supervisor.gateway.http_sessions import GatewaySession, GatewaySessions
    from supervisor.service import Supervisor

log = get_logger("supervisor.gateway")

WAIT_STEP_S = 0.05
"""How often ``wait_gone`` reads a silent holder's heartbeat row."""


class SessionMoving(Exception):
    """The session is between replicas now; the client's retry will find it."""


@attrs.frozen(slots=True)
class Elsewhere:
    """A live replica run holds the session: pass the request on to ``run``."""

    run: ReplicaRow


class Roaming:
    """This replica's side of roaming sessions (see the module docstring)."""

    def __init__(
        self,
        sessions: GatewaySessions,
        keeper: SessionKeeper,
        ids: SessionIds,
        ttl_s: float,
        drain_wait_s: float = 30.0,
    ) -> None:
        self.sessions = sessions
        self.keeper = keeper
        self.ids = ids
        self.ttl_s = ttl_s
        self.drain_wait_s = drain_wait_s
        self._saved: dict[str, int] = {}
        self._taking: dict[str, trio.Lock] = {}

    # ------------------------------------------------------------------- saving

    async def opened(self, record: GatewaySession) -> None:
        """A session was initialized here: its row, before its id goes to the client."""
        await self._save(record)

    async def after(self, record: GatewaySession) -> None:
        """A request was answered: save the state if it changed."""
        if fingerprint(record.peer) != self._saved.get(record.id):
            await self._save(record)

    async def _save(self, record: GatewaySession) -> None:
        mark = fingerprint(record.peer)
        state = snapshot(record.peer).to_json()
        person = record.peer.session.person
        held = await self.keeper.save(record.id, record.tenant, person, state, record.opened_at)
        if not held:
            log.warning(
                "gateway session taken over by another replica", extra={"fields": {"session": record.id}}
            )
            record.close_requested.set()  # another run holds it now: it ends here
            return
        self._saved[record.id] = mark

    async def ended(self, record: GatewaySession, *, hand_over: bool) -> None:
        """The session ended here: its row goes, or (a drain) stays for another replica."""
        self._saved.pop(record.id, None)
        if not record.peer.initialized:
            return
        if hand_over:
            await self._save(record)
            await self.keeper.hand_over([record.id])
        else:
            await self.keeper.end(record.id)

    # ----------------------------------------------------------------- takeover

    async def find(self, session_id: str, tenant: str) -> GatewaySession | Elsewhere | None:
        """The session, held here (taken over if its holder is gone), or the live run
        holding it; None for an id unknown to ``tenant``."""
        if self.ids.replica_of(session_id) is None:
            return None  # no replica minted it: no store read for made-up ids
        lock = self._taking.setdefault(session_id, trio.Lock())
        try:
            async with lock:
                local = self.sessions.get(session_id, tenant)
                if local is not None:
                    return local  # another request of it took it over meanwhile
                return await self._take_over(session_id, tenant)
        finally:
            if not lock.locked() and not lock.statistics().tasks_waiting:
                self._taking.pop(session_id, None)

    async def _take_over(self, session_id: str, tenant: str) -> GatewaySession | Elsewhere | None:
        for _ in range(8):  # each turn: another taker won the race; read again
            row = await self.keeper.row(session_id)
            if row is None or row.tenant != tenant:
                return None
            if row.owner == self.keeper.me:  # closing here
                if not self.sessions.handing_over:
                    return None  # it ended (DELETE, idle expiry)
                return await self._to_a_serving_replica(session_id)
            if row.owner is not None:
                run = await self.keeper.replica_run(row.owner)
                if run is not None and run.alive:
                    if run.state == "draining" and await self._handed_over(session_id, row.owner):
                        continue  # read it again, holder-less now, and take it
                    return Elsewhere(run)
            if not await self.keeper.take(session_id, row.owner):
                continue
            state = SessionState.from_json(row.state)
            record = await self.sessions.open(row.tenant, row.person, session_id=session_id, state=state)
            self._saved[session_id] = fingerprint(record.peer)
            log.info(
                "gateway session taken over",
                extra={"fields": {"session": session_id, "from": row.owner or "a drain"}},
            )
            return record
        return None

    async def _to_a_serving_replica(self, session_id: str) -> Elsewhere:
        """This replica drains: once its hand-over of the session is written, a live
        replica that is not draining takes it (the request is passed on to it)."""
        await self._handed_over(session_id, self.keeper.me)
        for run in await self.keeper.replicas():
            if run.alive and run.state == "serving" and run.incarnation != self.keeper.me:
                return Elsewhere(run)
        raise SessionMoving(session_id)

    async def _handed_over(self, session_id: str, holder: str) -> bool:
        """Wait (at most ``drain_wait_s``) for a draining holder to hand the session over."""
        with trio.move_on_after(self.drain_wait_s):
            while True:
                row = await self.keeper.row(session_id)
                if row is None or row.owner != holder:
                    return True
                await trio.sleep(WAIT_STEP_S)
        return False

    async def wait_gone(self, run: ReplicaRow, session_id: str) -> bool:
        """Wait (at most the TTL and a margin) until ``run`` let the session go: its
        heartbeat expired, or it handed the session over; whether it did (False: it is
        alive, holds it, and is only slow)."""
        with trio.move_on_after(self.ttl_s + 0.5):
            while True:
                row = await self.keeper.row(session_id)
                if row is None or row.owner != run.incarnation:
                    return True
                now = await self.keeper.replica_run(run.incarnation)
                if now is None or not now.alive:
                    return True
                await trio.sleep(WAIT_STEP_S)
        return False


@asynccontextmanager
async def roaming(sup: Supervisor, sessions: GatewaySessions) -> AsyncIterator[None]:
    """With a ``cluster`` section: ``sessions`` mint ids naming this replica and roam
    through the shared store for the duration of the block; else nothing changes."""
    replica, url = sup.replica, sup.config.store.url
    if replica is None or replica.cluster is None or url is None:
        yield
        return
    keys = SharedKeys(replica.cluster.keys)
    async with SessionKeeper.opened(url, replica) as keeper:
        sessions.ids = SessionIds(keys, replica.id)
        cluster = replica.cluster
        sessions.roaming = Roaming(sessions, keeper, sessions.ids, cluster.ttl_s, cluster.drain_s + 1.0)
        try:
            yield
        finally:
            sessions.roaming = None
