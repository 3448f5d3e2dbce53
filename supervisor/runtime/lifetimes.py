"""Lifetimes: nested nurseries, each of which stops what it holds when it ends.

A running supervisor is a stack of lifetimes, each inside the one that outlives it
(``Supervisor.open`` builds it; hypercorn's ``trio/run.py`` has the same shape; see
"Lifetimes" in ``docs/architecture.md``)::

    instance lock (+ child subreaper)      released last; escapees swept before
     └ store: SQLite (or PostgreSQL) open  dead instances recovered into it first
        └ store actor, audit journal, memory trim
        └ a replica's heartbeats           its own connection; its row removed at its stop
           └ router                        folds what came before its stop, then ends
              └ stdio hub                  one task for every local server's exits
                 └ connections             one-for-one; servers added/removed at runtime
                    └ people's connections ``per_user`` servers: one per (server, person)
                    └ warm pool            spare processes of ``warm: N`` servers
                       └ sessions          the host's ``async with sup.session()``
                                           (each with its private connections)

Stopping in reverse is structural: leaving a block ends its lifetime, which asks
what it holds to stop (``stop``: shielded, so it runs also when the host is
cancelled, and bounded by a deadline), cancels what is left, and only then lets the
lifetime around it go on to stop its own part.

Errors: a lifetime removes, with ``BaseExceptionGroup.split``, the errors its own
tasks raise *because it stopped* (a channel closed under them: ``SHUTDOWN_ERRORS``).
Everything else comes out: a task that failed while running, any error of the
block. A ``transparent`` lifetime adds no group of its own around an error that only
passed through it, so the nesting is invisible from outside: the host sees the one
group Trio gives a nursery around its block, as before there were several.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from actors.log_events import get_logger
from actors.router.actor import RouterActor, RouterMessage, StopRouter
from actors.transports.escapees import acquire_subreaper, kill_marked, release_subreaper, sweep_instance
from actors.transports.instances import InstanceLock, claim_dead_instances
from actors.transports.pidfiles import reap_orphans
from supervisor.runtime.memory_trim import trim_memory_periodically
from supervisor.runtime.retention import keep_audit
from supervisor.runtime.state_dir import lock_instance, open_store
from supervisor.settings.model import AuditSettings, Config
from supervisor.store import Store, StoreActor
from supervisor.store.journal import AuditJournal
from supervisor.store.policy_feed import PolicyMirror, follow_policy
from supervisor.store.replay import fold_journal, recover_audit_journals

log = get_logger("supervisor")

SHUTDOWN_GRACE_S = 10.0
"""How long one lifetime's graceful stop may take before what is left is cancelled."""

SHUTDOWN_ERRORS: tuple[type[BaseException], ...] = (
    trio.ClosedResourceError,
    trio.BrokenResourceError,
    trio.EndOfChannel,
)
"""What a task raises when a channel it uses is closed under it by a stop."""


@asynccontextmanager
async def lifetime(
    stop: Callable[[], Awaitable[object]] | None = None,
    *,
    grace_s: float = SHUTDOWN_GRACE_S,
    transparent: bool = True,
) -> AsyncIterator[trio.Nursery]:
    """A nursery for the tasks of one lifetime; see the module docstring.

    When the block ends (normally, with an error, or cancelled), ``stop()`` runs in a
    shielded scope with a deadline of ``grace_s``; then the nursery is cancelled, and
    its exit waits for the cancelled tasks. ``transparent=False`` keeps Trio's group
    around the block's error (for the lifetime a public ``async with`` yields from).
    """
    raised: BaseException | None = None
    clean = False
    error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield nursery
            except BaseException as exc:
                raised = exc
                raise
            finally:
                # Cancelled already: a task of ours failed before the block ended.
                clean = not nursery.cancel_scope.cancel_called
                if stop is not None:
                    with trio.CancelScope(shield=True, deadline=trio.current_time() + grace_s):
                        await stop()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        error = unexpected(group, raised, clean=clean, transparent=transparent)
    if error is not None:
        raise error  # outside the handler: the error keeps its own context, not the group


def unexpected(
    group: BaseExceptionGroup[BaseException],
    raised: BaseException | None,
    *,
    clean: bool,
    transparent: bool,
) -> BaseException | None:
    """What is left of a lifetime's ``group`` to raise (None: nothing).

    ``raised`` is what the block raised (never removed); ``clean`` says the lifetime
    was stopping because its block ended, not because a task had failed, so that its
    tasks' ``SHUTDOWN_ERRORS`` were caused by the stop.
    """
    from_block = {id(leaf) for leaf in _leaves(raised)}

    def caused_by_the_stop(exc: BaseException) -> bool:
        return clean and isinstance(exc, SHUTDOWN_ERRORS) and id(exc) not in from_block

    _expected, rest = group.split(caused_by_the_stop)
    if rest is None:
        return None
    if transparent and raised is not None and {id(leaf) for leaf in _leaves(rest)} == from_block:
        return raised
    return rest


def _leaves(exc: BaseException | None) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    elif exc is not None:
        yield exc


# ------------------------------------------------------------- the supervisor's


@asynccontextmanager
async def instance_claimed(state_path: Path, kind: str, subreaper: bool) -> AsyncIterator[InstanceLock]:
    """This instance's lock in the state directory, and optionally this process as a
    child subreaper, for the block. At its end the escapees no server teardown caught
    are killed, and the lock goes last: until then our servers' pidfiles are ours alone."""
    lock = lock_instance(state_path, kind)
    subreaping = subreaper and acquire_subreaper()
    try:
        yield lock
    finally:
        try:
            await sweep_instance(lock.id)  # shielded, quick
        finally:
            if subreaping:
                release_subreaper()
            lock.release()


async def recover_dead_instances(state_path: Path, store: Store | None = None) -> None:
    """Clean up after the supervisor instances of this state directory that died
    (SIGKILL, OOM, a power cut): kill the servers they left running and, given the
    ``store``, fold their audit journals into it (``supervisor.store.replay``).

    One claim covers every recovery, so two instances starting at once never recover
    the same dead one, and one whose recovery failed is tried again by the next start
    (``done()`` only after everything succeeded).
    """
    with claim_dead_instances(state_path) as dead:
        ids = {d.id for d in dead}
        reaped = await trio.to_thread.run_sync(reap_orphans, state_path, ids)
        # Their servers' escapees too (a daemon that left the server's group), found
        # anywhere by the marker naming a dead instance.
        reaped += await trio.to_thread.run_sync(kill_marked, ids)
        if reaped:
            log.warning("cleaned up orphans", extra={"fields": {"pids": ",".join(map(str, reaped))}})
        recovered = dead
        if store is not None:  # a journal that cannot be folded now keeps its claim open
            recovered = await trio.to_thread.run_sync(recover_audit_journals, store, state_path, dead)
        for instance in recovered:
            instance.done()


@asynccontextmanager
async def store_opened(state_path: Path, config: Config) -> AsyncIterator[Store]:
    """The state directory's database, open for the block (closed once every writer is done)."""
    store = await trio.to_thread.run_sync(open_store, state_path, config)
    try:
        yield store
    finally:
        store.close()


@asynccontextmanager
async def store_running(
    store: StoreActor,
    journal: AuditJournal,
    audit: AuditSettings | None = None,
    policy: PolicyMirror | None = None,
) -> AsyncIterator[None]:
    """The store actor, the audit journal and its folder (``store.folding``, a process:
    ``supervisor.store.folding``), the memory trim, with ``audit.keep_days`` the
    audit's retention (``supervisor.runtime.retention``), and with ``policy`` (on
    PostgreSQL) the listener that keeps its pins and answers in step with the other
    supervisors' (``supervisor.store.policy_feed``), for the block. At its end
    (within the grace): what is queued is written to the store, the folder makes its
    last pass and ends, then the journal is folded in here where the folder may have
    missed rows (calls still in flight become ``interrupted``), and deleted."""

    async def fold_all(paths: list[Path]) -> None:
        await store.read(functools.partial(fold_journal, paths=paths, interrupted=True))

    async def stop() -> None:
        await store.aclose()
        folded = await store.folding.stop() if store.folding is not None else None
        await journal.aclose(fold_all, folded)

    async with lifetime(stop) as nursery:
        await nursery.start(trim_memory_periodically)
        await nursery.start(store.run)
        await nursery.start(journal.run)
        if store.folding is not None:
            await nursery.start(store.folding.run)
        if audit is not None and audit.keep_days is not None:
            await nursery.start(keep_audit, store, audit.keep_days)
        if policy is not None:
            await nursery.start(follow_policy, store, policy)
        yield


@asynccontextmanager
async def router_running(
    router: RouterActor, mailbox: trio.MemorySendChannel[RouterMessage]
) -> AsyncIterator[None]:
    """The router, for the block. At its end it folds what was sent to it before
    (the last state changes of the connections, which ended first), then ends."""
    ended = trio.Event()

    async def run(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await router.run(task_status=task_status)
        finally:
            ended.set()

    async def stop() -> None:
        with contextlib.suppress(trio.BrokenResourceError):  # it has ended already
            await mailbox.send(StopRouter())
            await ended.wait()

    async with lifetime(stop) as nursery:
        await nursery.start(run)
        yield
