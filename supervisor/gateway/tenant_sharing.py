"""New-era tenant states shared by every replica: no affinity needed.

A 2026-07-28 client has no session, so a round-robin balancer sends its ``tool_search``
to one replica and its next ``tools/list`` to another. With a ``cluster`` section each
replica's ``TenantState`` (``tenants.py``) is kept in step through the shared store
(``store/tenant_rows.py``):

- after a request is answered, and before its answer goes out, the state's activations
  and "for the session" approvals are added to the key's rows if they changed since the
  last write (a cheap fingerprint); the write announces the key (``pg_notify``);
- every replica listens on a connection of its own and, on an announcement, reads that
  key's rows into its state of the key, if it has one; a state opened here first reads
  them. A lost listener connects again (every ``RETRY_S``) and then reads every open
  state again, since announcements made meanwhile went unheard;
- a replica marks a key used when it writes it and, while answering, at most every
  quarter of the idle time; when its state expires, the rows go if no replica used the
  key for ``gateway.session_idle_s`` (``Store.end_tenant_state``).

Writes and reads run on a connection of the gateway's own, one worker thread at a time
(as ``cluster/session_keeper.py``): never behind the store actor's audit batches. A
store that fails a write is logged; the answer still goes out, and the next change
writes everything again (rows only grow, so nothing is lost by writing twice).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

import trio

from actors.log_events import get_logger
from actors.router.trust import Action
from supervisor.gateway.tenants import Key, TenantState, TenantStates
from supervisor.store.errors import DatabaseError, StoreError
from supervisor.store.listening import Channel, follow_channel
from supervisor.store.tenant_rows import SharedTenantState

if TYPE_CHECKING:
    from supervisor.service import Supervisor
    from supervisor.store import Store

log = get_logger("supervisor.gateway")
T = TypeVar("T")

RETRY_S = 1.0
"""How long a lost listener waits before it connects again."""


def fingerprint(state: TenantState) -> int:
    """Cheap to take after every request: changes when what is shared does."""
    session = state.session
    return hash((tuple(session.activated), tuple(session.memory.items())))


def merge(state: TenantState, shared: SharedTenantState) -> None:
    """Add the store's rows to ``state`` (what it has already stays as it is)."""
    session = state.session
    for tool in shared.activated:
        session.activated.setdefault(tool, len(session.activated))
    for permission, print_, action in shared.approvals:
        session.memory.setdefault((permission, print_), Action(action))


class TenantSharing:
    """This replica's side of shared tenant states (see the module docstring)."""

    def __init__(self, store: Store, states: TenantStates) -> None:
        self._store = store
        self._states = states
        self._limiter = trio.CapacityLimiter(1)
        self._written: dict[Key, int] = {}
        self._used: dict[Key, float] = {}
        self.notices = 0
        """Announcements read (for tests)."""

    async def _do(self, fn: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(fn, limiter=self._limiter)

    async def opened(self, state: TenantState) -> None:
        """A state was opened here: it starts with the key's rows."""
        key = (state.tenant, state.person)
        read = await self._try(functools.partial(self._store.tenant_state, *key, use=True))
        if read is not None:
            merge(state, read[0])
            self._used[key] = trio.current_time()
        self._written[key] = fingerprint(state) if read is not None else 0

    async def after(self, state: TenantState) -> None:
        """A request was answered: add what changed to the rows, before the answer goes out."""
        key, mark, now = (state.tenant, state.person), fingerprint(state), trio.current_time()
        session = state.session
        if mark != self._written.get(key):
            activated = tuple(session.activated.items())
            approvals = tuple((p, f, str(a)) for (p, f), a in session.memory.items())
            write = functools.partial(self._store.add_tenant_state, *key, activated, approvals)
            if await self._try(write) is not None:
                self._written[key], self._used[key] = mark, now
            return
        stale = now - self._used.get(key, -math.inf) >= self._states.idle_s / 4
        if stale and await self._try(functools.partial(self._store.use_tenant_state, *key)) is not None:
            self._used[key] = now

    async def closed(self, state: TenantState) -> None:
        """The state expired here: the rows go if no replica used the key for the idle time."""
        key = (state.tenant, state.person)
        self._written.pop(key, None)
        self._used.pop(key, None)
        await self._try(functools.partial(self._store.end_tenant_state, *key, self._states.idle_s))

    async def _try(self, fn: Callable[[], T]) -> tuple[T] | None:
        """``(fn's value,)``, or None when the store failed twice (logged): the first
        failure may be a connection the database dropped, which the second replaces."""
        try:
            try:
                return (await self._do(fn),)
            except (DatabaseError, StoreError):
                return (await self._do(fn),)
        except (DatabaseError, StoreError) as exc:
            log.warning(
                "shared tenant state not written or read; other replicas catch up at its next change",
                extra={"fields": {"why": " ".join(str(exc).split())}},
            )
            return None

    async def reload(self, key: Key) -> None:
        """Read the key's rows into this replica's state of it, if it has one."""
        if self._states.get(*key) is None:
            return
        shared = await self._do(functools.partial(self._store.tenant_state, *key))
        state = self._states.get(*key)
        if state is None:
            return
        before = fingerprint(state)
        merge(state, shared)
        if self._written.get(key) == before:  # nothing of ours unwritten: the rows are all we have
            self._written[key] = fingerprint(state)

    async def reload_all(self) -> None:
        """Read every open state's rows (what was announced while nobody listened)."""
        for key in self._states.open_keys():
            await self.reload(key)

    async def heard(self, payload: str) -> None:
        """One announcement: the key it names is read again."""
        self.notices += 1
        try:
            tenant, person = json.loads(payload)
        except (ValueError, TypeError):
            log.warning("tenant state announcement skipped", extra={"fields": {"payload": payload[:200]}})
            return
        await self.reload((str(tenant), None if person is None else str(person)))

    def channel(self) -> Channel:
        return Channel(
            self._store.listen_tenant_states,
            self.reload_all,
            self.heard,
            logger="supervisor.gateway",
            lost="tenant state listener lost; what other replicas add waits until it is back",
            back="tenant state listener back",
        )


@asynccontextmanager
async def tenant_sharing(sup: Supervisor, states: TenantStates) -> AsyncIterator[None]:
    """With a ``cluster`` section: ``states`` are shared with the other replicas for the
    duration of the block; else nothing changes (and nothing is done per request)."""
    replica, url = sup.replica, sup.config.store.url
    if replica is None or replica.cluster is None or url is None:
        yield
        return
    from supervisor.store.postgres import open_postgres

    store = await trio.to_thread.run_sync(open_postgres, url)
    try:
        sharing = TenantSharing(store, states)
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(follow_channel, sharing.channel(), RETRY_S))
            states.sharing = sharing
            try:
                yield
            finally:
                states.sharing = None
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(store.close)
