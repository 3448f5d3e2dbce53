"""Warm session servers: spare processes of ``warm: N`` servers, spawned before a session asks.

A ``scope: session`` (or ``bridge: true``) local server starts a process per session,
and a Python server spends most of its first second importing. With ``warm: N`` the
pool keeps N processes of it spawned and idle, *before* ``initialize``: a session that
opens the server adopts one (``open_stdio_transport(spares=...)``), and its own
connection actor runs the handshake on it as usual, so the session's own capabilities
still go into its ``initialize``. A bridge session takes one raw the same way.

Rules:

- A spare is taken once, by one session, and torn down when that session ends, like
  any session's process; it is never given back. Each take wakes the server's keeper,
  which spawns a fresh spare once the burst of opens it belongs to has passed.
- A burst of opens raises the spares kept to its size for a minute (up to 16):
  ``warm`` is the least (``warm_demand.py``); idle spares beyond what is wanted are
  torn down, youngest first.
- A spare that dies while it waits is torn down and replaced on the server's reconnect
  schedule (about 1, 2, 5, 15, 60 s by default, each delay jittered by its
  ``reconnect_jitter``; a spare that lived ``reset_after_s`` starts it over, and so
  does a take), so a server that cannot start is no hot respawn loop.
  A spawn that fails (command missing) waits the same way.
- Spares count toward the process cap of what takes them: a spare of a ``bridge: true``
  server is one of the bridge's ``bridge.max_processes`` from its spawn until it is
  reaped (``held``). A take moves it from spare to session: it is counted once. The
  pool owns the cap (``cap``, ``process_cap.py``), which the hub asks too: a keeper
  spawns no spare while its server has no room, and waits for ``nudge`` (a session
  ended). Sessions come first: a
  session that finds the cap full of other servers' spares evicts one (``evict``) and
  takes its place. The gateway has no process cap, so a ``scope: session`` server's
  spares count toward none.
- Spares are spawned with the stdio transport's own spawn (process group, parent-death
  signal, pidfile, marker) and torn down with its teardown: stdin closed, SIGTERM,
  SIGKILL, reaped. While idle, the stdio hub watches their exit; their stderr waits in
  its pipe (a pipe's worth) and is read by the transport that takes them.

Structure: ``WarmPool`` is an actor owned by the supervisor, with a nursery of its own
inside the stdio hub's lifetime (``Supervisor.open``). Each warm server has a keeper
task there that owns its spares (they are torn down, shielded, when it ends: at
shutdown, or when a reload changes or removes the server, ``retune``). A take is a
synchronous step on the pool's own state, made inside the transport's open with no
checkpoint before the transport's ``try``: a spare is always owned by exactly one
task.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import attrs
import trio

from actors.connection import retry
from actors.connection.retry import Draw, schedule_of
from actors.connection.schedule import ReconnectSchedule
from actors.log_events import get_logger
from actors.spec import Scope, ServerSpec
from actors.transport_errors import SpawnError
from actors.transports.base import Connector, Transport
from actors.transports.connector import TransportConnector
from actors.transports.spawned import SpareSource, Spawned
from supervisor.runtime.lifetimes import lifetime
from supervisor.runtime.process_cap import ProcessCap, counts_toward_cap
from supervisor.runtime.warm_demand import Demand

__all__ = ["WarmPool", "keeps_spares"]

log = get_logger("supervisor.warm_pool")


def keeps_spares(spec: ServerSpec) -> bool:
    """Whether the pool keeps spares of ``spec``: a local server with ``warm`` set that
    starts a process per session (``scope: session`` or ``bridge: true``)."""
    per_session = spec.scope is Scope.SESSION or spec.bridge
    return spec.warm > 0 and spec.enabled and spec.type == "local" and per_session


@attrs.define(eq=False)
class _Keeper:
    """One warm server's spares, owned by its keeper task."""

    spec: ServerSpec
    schedule: ReconnectSchedule
    demand: Demand
    idle: list[Spawned] = attrs.field(factory=list)
    dead: list[Spawned] = attrs.field(factory=list)  # died while waiting, not yet torn down
    wake: trio.Event = attrs.field(factory=trio.Event)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    ended: trio.Event = attrs.field(factory=trio.Event)
    pending: int = 0  # spares being spawned or torn down by the keeper (counted)
    attempt: int = 0  # consecutive failures (deaths, failed spawns)
    resume_at: float = 0.0  # trio time before which no spare is spawned


class WarmPool:
    """The spares of every warm server of one supervisor (see the module docstring)."""

    def __init__(
        self,
        connector: Connector,
        specs: Iterable[ServerSpec],
        *,
        max_processes: Callable[[], int] = lambda: 0,
        draw: Draw = retry.draw,
    ) -> None:
        self._draw = draw  # where each respawn falls within the schedule's jitter
        # Only the real connector spawns processes; with any other there are no spares.
        self._spawner = connector if isinstance(connector, TransportConnector) else None
        self._initial = tuple(spec for spec in specs if keeps_spares(spec))
        self._keepers: dict[str, _Keeper] = {}
        self._nursery: trio.Nursery | None = None
        self._changing = trio.Lock()
        self._retiring: set[_Keeper] = set()  # keepers gone from the config, spares still closing
        self._changed = trio.Event()  # set (and replaced) whenever a spare comes or goes
        self.cap = ProcessCap(max_processes, lambda: self.held(counts_toward_cap))
        """``bridge.max_processes`` (``max_processes()``): this pool's bridged spares and
        the hub's sessions."""

    def room(self, spec: ServerSpec) -> bool:
        """Whether one more spare of ``spec`` fits under its process cap (a server that
        counts toward none always has room)."""
        return not counts_toward_cap(spec) or self.cap.room_for_spare()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Keep the spares for the block; at its end every idle spare is torn down."""
        async with lifetime() as nursery:
            self._nursery = nursery
            try:
                for spec in self._initial:
                    await self._start_keeper(spec)
                yield
            finally:
                self._nursery = None

    # ------------------------------------------------------------------ checkout

    def take(self, spec: ServerSpec) -> Spawned | None:
        """An idle spare of ``spec`` for the caller to own from now on, or None (spawn
        one). Synchronous: the caller owns it before its next checkpoint. Only a spare
        spawned from this very spec is taken (a reload may have changed the server)."""
        keeper = self._keepers.get(spec.name)
        if keeper is None or keeper.spec != spec or self._spawner is None:
            return None
        keeper.demand.took(trio.current_time())
        keeper.wake.set()  # refill (once the burst has passed), even when none was idle
        while keeper.idle:
            spare = keeper.idle.pop(0)
            self._spawner.hub.unwatch_exit(spare.process)
            if spare.process.poll() is not None:  # died before the hub said so
                self._died(keeper, spare)
                continue
            keeper.attempt = 0
            self._note_change()
            return spare
        return None

    def connector(self, spec: ServerSpec) -> Connector | None:
        """The connector of a session's ``spec`` connection that adopts a spare when the
        pool has one (None: the pool keeps none of ``spec``)."""
        if self._spawner is None or not keeps_spares(spec):
            return None
        return _Adopting(self._spawner, self.take)

    def idle(self, server: str) -> tuple[int, ...]:
        """The pids of ``server``'s idle spares, oldest first (for status and tests)."""
        keeper = self._keepers.get(server)
        return tuple(spare.process.pid for spare in keeper.idle) if keeper is not None else ()

    def wanted(self, server: str) -> int:
        """How many spares of ``server`` the pool wants now (its ``warm``, or a recent
        burst's size; 0: it keeps none)."""
        keeper = self._keepers.get(server)
        return keeper.demand.wanted(trio.current_time()) if keeper is not None else 0

    async def wait_for(self, server: str, check: Callable[[tuple[int, ...]], bool]) -> tuple[int, ...]:
        """Wait until ``check`` holds of ``server``'s idle pids, and return them."""
        while not check(pids := self.idle(server)):
            await self._changed.wait()
        return pids

    def evict(self, which: Callable[[ServerSpec], bool]) -> Spawned | None:
        """An idle spare of a server ``which`` accepts, for the caller to tear down (a
        session that needs its place under the cap), or None. Synchronous, like ``take``."""
        for keeper in self._keepers.values():
            if which(keeper.spec) and keeper.idle and self._spawner is not None:
                spare = keeper.idle.pop()  # the youngest: the oldest has imported furthest
                self._spawner.hub.unwatch_exit(spare.process)
                self._note_change()
                return spare
        return None

    def held(self, which: Callable[[ServerSpec], bool]) -> int:
        """The spare processes alive (idle, dead unreaped, being torn down) of servers
        ``which`` accepts: what they count toward a process cap."""
        keepers = [*self._keepers.values(), *self._retiring]
        return sum(len(k.idle) + len(k.dead) + k.pending for k in keepers if which(k.spec))

    def nudge(self) -> None:
        """Room may have come under a cap (a session ended): keepers short of spares look again."""
        now = trio.current_time()
        for keeper in self._keepers.values():
            if len(keeper.idle) < keeper.demand.wanted(now):
                keeper.wake.set()

    def _note_change(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def count(self, server: str) -> int:
        """How many processes the pool holds of ``server`` now (idle or being torn down)."""
        keeper = self._keepers.get(server)
        return len(keeper.idle) + len(keeper.dead) if keeper is not None else 0

    # ------------------------------------------------------------------- reload

    async def retune(self, specs: Iterable[ServerSpec]) -> None:
        """A reload: stop the spares of servers that changed or went, keep new ones'."""
        wanted = {spec.name: spec for spec in specs if keeps_spares(spec)}
        async with self._changing:
            for name, keeper in list(self._keepers.items()):
                if wanted.get(name) != keeper.spec:
                    del self._keepers[name]  # no take finds its spares from here on
                    keeper.scope.cancel()
                    await keeper.ended.wait()
            for name, spec in wanted.items():
                if name not in self._keepers:
                    await self._start_keeper(spec)

    # ------------------------------------------------------------------ keepers

    async def _start_keeper(self, spec: ServerSpec) -> None:
        if self._spawner is None or self._nursery is None:
            return
        keeper = _Keeper(spec, schedule_of(spec), Demand(spec.warm))
        self._keepers[spec.name] = keeper
        await self._nursery.start(self._keep, keeper, self._spawner)

    async def _keep(
        self,
        keeper: _Keeper,
        spawner: TransportConnector,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Keep the spares ``keeper.demand`` wants until cancelled; tear them down at the end."""
        try:
            with keeper.scope:
                task_status.started()
                while True:
                    await self._bury(keeper)
                    demand, now = keeper.demand, trio.current_time()
                    wanted = demand.wanted(now)
                    if len(keeper.idle) > wanted:
                        await self._shed(keeper, spawner)
                        continue
                    wake_at = demand.next_change()
                    if len(keeper.idle) < wanted and self.room(keeper.spec):
                        start_at = max(keeper.resume_at, demand.refill_at())
                        if start_at <= now:
                            await self._spawn_one(keeper, spawner)
                            continue
                        wake_at = min(wake_at, start_at)
                    elif len(keeper.idle) >= wanted:
                        demand.refilled()
                    with trio.move_on_at(wake_at):
                        await keeper.wake.wait()
                    keeper.wake = trio.Event()
        finally:
            if self._keepers.get(keeper.spec.name) is keeper:
                del self._keepers[keeper.spec.name]
            left, keeper.idle, keeper.dead = [*keeper.idle, *keeper.dead], [], []
            for spare in left:
                spawner.hub.unwatch_exit(spare.process)
            keeper.pending += len(left)  # counted toward a cap until reaped (``held``)
            self._retiring.add(keeper)
            self._note_change()
            with trio.CancelScope(shield=True):  # each teardown is bounded on its own
                async with trio.open_nursery() as nursery:
                    for spare in left:
                        nursery.start_soon(spare.aclose)
            keeper.pending -= len(left)
            self._retiring.discard(keeper)
            self._note_change()
            self.nudge()  # their places under a cap may go to other servers' spares
            keeper.ended.set()

    async def _spawn_one(self, keeper: _Keeper, spawner: TransportConnector) -> None:
        spec = keeper.spec
        keeper.pending += 1
        try:
            spare = await spawner.spawn_spare(spec)
        except SpawnError as exc:
            self._failed(keeper, str(exc), lived_s=None)
            return
        finally:
            keeper.pending -= 1
        # No checkpoint since the spawn: the spare is the keeper's before anything can cancel.
        keeper.idle.append(spare)
        spawner.hub.watch_exit(spare.process, functools.partial(self._died, keeper, spare))
        self._note_change()

    async def _shed(self, keeper: _Keeper, spawner: TransportConnector) -> None:
        """Tear down the youngest idle spare: a burst's demand has passed."""
        spare = keeper.idle.pop()
        spawner.hub.unwatch_exit(spare.process)
        keeper.pending += 1  # counted toward a cap until reaped
        self._note_change()
        try:
            await spare.aclose()
        finally:
            keeper.pending -= 1
            self._note_change()

    async def _bury(self, keeper: _Keeper) -> None:
        """Tear down the spares that died while waiting (the hub reaped them already)."""
        while keeper.dead:
            spare = keeper.dead.pop(0)
            keeper.pending += 1
            try:
                await spare.aclose()
            finally:
                keeper.pending -= 1

    def _died(self, keeper: _Keeper, spare: Spawned) -> None:
        """Hub callback: an idle spare exited. It is torn down by its keeper, which
        spawns the next one after the schedule's delay."""
        spare.group.exited()  # what it left in its group goes with it
        if spare in keeper.idle:
            keeper.idle.remove(spare)
        keeper.dead.append(spare)
        self._note_change()
        lived = trio.current_time() - spare.started_at
        self._failed(keeper, f"exited while waiting (status {spare.process.returncode})", lived_s=lived)

    def _failed(self, keeper: _Keeper, reason: str, *, lived_s: float | None) -> None:
        keeper.attempt = keeper.schedule.next_attempt(keeper.attempt, lived_s)
        delay = keeper.schedule.delay(keeper.attempt, self._draw())
        keeper.resume_at = trio.current_time() + delay
        fields = {"server": keeper.spec.name, "reason": reason, "retry_in_s": round(delay, 3)}
        log.warning("warm spare lost", extra={"fields": fields})
        keeper.wake.set()


@attrs.frozen(eq=False)
class _Adopting:
    """A session connection's connector: its local process is a spare when one waits."""

    base: TransportConnector
    take: SpareSource

    def __call__(self, spec: ServerSpec) -> AbstractAsyncContextManager[Transport]:
        if spec.type != "local":
            return self.base(spec)
        return self.base.open_local(spec, self.take)
