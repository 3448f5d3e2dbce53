"""``StoreActor``: the store's one owner in the service.

Callers on the call path (remembering an approval, a tool list) never wait for SQLite,
so they ``submit`` a message without blocking; a full mailbox drops the message and
counts it. (Audit rows do not come here: each is written to the audit journal before
its call is answered, and the folder process inserts them, ``supervisor.store.folding``;
``flush`` waits for it too.) The actor takes everything queued, writes it as ONE
transaction in a worker thread, and repeats: under load, batches grow and commits
per row shrink. After the first message of a batch it lingers a moment (``linger_s``,
5 ms by default; cut short by ``flush``, ``close`` or a full batch) so that calls made
one after another share a transaction and a thread hop instead of paying one each.

A write that fails is counted, never raised: losing an audit row is bad, taking the
supervisor down because a disk filled up is worse. A failed batch is retried one message
at a time, so one bad message cannot take its neighbours with it. What no journal
holds (remembered approvals, pins, tool lists, eras, audit rows given to the actor
directly) is lost, and one line at most every 10 s says how much
(``supervisor.store.unsaved``).

Shutdown: when the mailbox is closed (``close()``) the actor writes what is left and
returns. When cancelled, it writes what is queued in a shielded scope with a deadline;
at the deadline it stops waiting, counts those messages as failures, and tells the
still-running write thread to roll back instead of committing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar, assert_never

import attrs
import trio

from actors.log_events import get_logger
from actors.mailbox import queued
from supervisor.store.database import Store
from supervisor.store.errors import database_failed
from supervisor.store.messages import (
    AddAudit,
    ForgetApproval,
    RememberApproval,
    SaveEra,
    SaveToolList,
    SetPin,
    StoreMessage,
)
from supervisor.store.unsaved import Unsaved

if TYPE_CHECKING:
    from supervisor.store.folding import Folding

log = get_logger("supervisor.store")

T = TypeVar("T")

DEFAULT_CAPACITY = 4096
# ``put`` waits this long for room in a full mailbox before it counts a row as dropped.
PUT_WAIT_S = 5.0
DEFAULT_SHUTDOWN_TIMEOUT_S = 5.0
DEFAULT_LINGER_S = 0.005
LINGER_BATCH = 256  # this many waiting messages end the linger at once


@attrs.frozen(slots=True)
class StoreStatistics:
    """Counters since the actor was made, in messages unless named otherwise.

    ``written``: committed. ``batches``: transactions committed. ``dropped``: refused by
    ``submit`` (mailbox full or closed). ``failures``: accepted but lost to a failed
    write. ``queued``: in the mailbox now.
    """

    written: int
    batches: int
    dropped: int
    failures: int
    queued: int


@attrs.frozen(slots=True)
class _Outcome:
    written: int
    batches: int
    failed: Sequence[StoreMessage] = ()  # not committed
    error: BaseException | None = None  # why (the first error, when several)

    @property
    def failures(self) -> int:
        return len(self.failed)


# ------------------------------------------------------------------------ writing (worker thread)


def _apply(store: Store, batch: Sequence[StoreMessage]) -> None:
    """Apply ``batch`` inside the caller's transaction, in order per key."""
    rows = [m.row for m in batch if isinstance(m, AddAudit)]
    if rows:
        store.add_audit(rows)
    # Only the last list per server survives: skip serializing the ones it replaces.
    last_list = {m.server: i for i, m in enumerate(batch) if isinstance(m, SaveToolList)}
    for i, message in enumerate(batch):
        if isinstance(message, AddAudit):
            pass
        elif isinstance(message, RememberApproval):
            store.remember_approval(message.tenant, message.permission, message.fingerprint, message.decision)
        elif isinstance(message, ForgetApproval):
            store.forget_approval(message.tenant, message.permission)
        elif isinstance(message, SetPin):
            store.set_pin(message.server, message.tool, message.fingerprint, message.parts)
        elif isinstance(message, SaveToolList):
            if last_list[message.server] == i:
                store.save_tool_list(message.server, message.tools, message.listed_at, message.surface)
        elif isinstance(message, SaveEra):
            store.save_era(message.server, message.era, message.found_at)
        else:
            assert_never(message)


class _Abandoned(Exception):
    """The actor stopped waiting for this write (shutdown deadline)."""


def _commit(store: Store, batch: Sequence[StoreMessage], stop: threading.Event) -> _Outcome:
    """Write ``batch`` as one transaction; if that fails, one transaction per message
    (unless ``stop`` says the actor gave up on this write at its shutdown deadline).

    Catches every Exception on purpose (see the module docstring): the failure comes
    back in the outcome, which the actor reports.
    """
    if stop.is_set():
        return _Outcome(written=0, batches=0, failed=batch)
    try:
        with store.transaction():
            _apply(store, batch)
            if stop.is_set():  # abandoned while we worked: roll back, as the actor reported
                raise _Abandoned
        return _Outcome(written=len(batch), batches=1)
    except _Abandoned:
        return _Outcome(written=0, batches=0, failed=batch)
    except Exception as exc:
        # A failed database (full, locked) would fail a retry per message N times, each
        # after waiting out the busy timeout: only one message's bad data is retried.
        if len(batch) == 1 or stop.is_set() or database_failed(exc):
            return _Outcome(written=0, batches=0, failed=batch, error=exc)
        first_error: Exception = exc
    failed: list[StoreMessage] = []
    for message in batch:
        if stop.is_set():
            failed.append(message)
            continue
        try:
            with store.transaction():
                _apply(store, [message])
        except Exception:
            failed.append(message)  # first_error tells why; one report per batch, not per row
    written = len(batch) - len(failed)
    return _Outcome(written=written, batches=written, failed=failed, error=first_error if failed else None)


# ------------------------------------------------------------------------ the actor


class StoreActor:
    """The async owner of a ``Store``: non-blocking ``submit``, batched writes off the
    event loop, ``flush`` to wait for them, ``read`` for queries. Start ``run`` with
    ``await nursery.start(actor.run)``; the owner closes the Store after ``run`` returns.
    """

    def __init__(
        self,
        store: Store,
        *,
        capacity: int = DEFAULT_CAPACITY,
        shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
        linger_s: float = DEFAULT_LINGER_S,
    ) -> None:
        self.store = store
        self._send, self._receive = trio.open_memory_channel[StoreMessage](capacity)
        self._shutdown_timeout_s = shutdown_timeout_s
        self._linger_s = linger_s
        self._hurry = trio.Event()  # set: write what is queued now, do not linger
        self._accepted = 0  # messages submit() or put() took
        self._settled = 0  # of those, written or counted as failed (FIFO, so a prefix)
        self._progress = trio.Event()
        self._stop = threading.Event()  # tells an abandoned write thread to give up
        self._written = self._batches = self._dropped = self._failures = 0
        self._unsaved = Unsaved()
        self.folding: Folding | None = None
        """The journal's folder, which ``flush`` waits for too (None: no journal)."""

    # -------------------------------------------------------------- callers' side

    def submit(self, message: StoreMessage) -> bool:
        """Queue a write without ever blocking; False (and counted) when the mailbox is
        full or closed."""
        try:
            self._send.send_nowait(message)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            self._dropped += 1
            return False
        self._took()
        return True

    def _took(self) -> None:
        self._accepted += 1
        if self._accepted - self._settled >= LINGER_BATCH:
            self._hurry.set()

    async def put(self, message: StoreMessage, wait_s: float = PUT_WAIT_S) -> bool:
        """Queue a write; when the mailbox is full, wait for room (up to ``wait_s``, also
        when the caller is being cancelled), so a stalled disk slows callers down instead
        of losing their audit rows. False (and counted) if it stays full or is closed."""
        try:
            self._send.send_nowait(message)
        except trio.WouldBlock:
            self._hurry.set()
            with (
                trio.CancelScope(shield=True, deadline=trio.current_time() + wait_s),
                contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError),
            ):
                await self._send.send(message)
                self._took()
                return True
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        else:
            self._took()
            return True
        self._dropped += 1
        return False

    async def flush(self) -> None:
        """Wait until everything submitted so far is written (or counted as failed), and
        the folder has committed every audit row journaled so far (bounded: ``Folding.flush``).

        Needs ``run`` to be running (or to have returned); bound it with a deadline.
        """
        await self._written_all()
        if self.folding is not None:
            await self.folding.flush()

    async def _written_all(self) -> None:
        target = self._accepted
        while self._settled < target:
            self._hurry.set()
            await self._progress.wait()

    async def read(self, query: Callable[[Store], T]) -> T:
        """Run ``query(store)`` in a worker thread (e.g. ``lambda s: s.audit_rows(tenant=t)``);
        the Store's lock keeps it out of a write in progress."""
        return await trio.to_thread.run_sync(query, self.store)

    def close(self) -> None:
        """Refuse further messages; ``run`` writes what is queued and returns."""
        self._send.close()
        self._hurry.set()

    async def aclose(self) -> None:
        """``close``, then wait until what was queued is written (graceful shutdown)."""
        self.close()
        await self._written_all()

    def statistics(self) -> StoreStatistics:
        """A snapshot of the counters."""
        return StoreStatistics(
            written=self._written,
            batches=self._batches,
            dropped=self._dropped,
            failures=self._failures,
            queued=self._receive.statistics().current_buffer_used,
        )

    # -------------------------------------------------------------- the loop

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write batches until the mailbox is closed; on cancellation, write what is
        queued (shielded, under the shutdown deadline) and re-raise."""
        task_status.started()
        batch: list[StoreMessage] = []
        try:
            while True:
                if not batch:
                    try:
                        batch.append(await self._receive.receive())
                    except trio.EndOfChannel:
                        return
                    await self._linger()
                batch.extend(self._drain())
                # Not abandonable: a write that started finishes (bounded by busy_timeout),
                # and if cancellation strikes before it starts, ``batch`` is still ours.
                outcome = await trio.to_thread.run_sync(_commit, self.store, batch, self._stop)
                self._settle(batch, outcome)
                batch = []
        finally:
            # Take the rest and close our end in one step (no checkpoint between), so a
            # late submit is refused and counted rather than silently never written.
            batch.extend(self._drain())
            self._receive.close()
            if batch:
                await self._write_before_deadline(batch)
            self._unsaved.report(trio.current_time(), final=True)

    async def _linger(self) -> None:
        """Let a batch gather for up to ``linger_s`` unless someone is waiting for it."""
        if self._linger_s > 0 and not self._hurry.is_set():
            with trio.move_on_after(self._linger_s):
                await self._hurry.wait()
        self._hurry = trio.Event()

    def _drain(self) -> list[StoreMessage]:
        return list(queued(self._receive))

    async def _write_before_deadline(self, batch: list[StoreMessage]) -> None:
        outcome: _Outcome | None = None
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + self._shutdown_timeout_s
            # Abandonable here, and only here: the deadline must hold. An abandoned thread
            # is told to roll back rather than commit (``_stop``) and interrupted, which
            # ends a long statement at once (a busy wait still runs to busy_timeout).
            outcome = await trio.to_thread.run_sync(
                _commit, self.store, batch, self._stop, abandon_on_cancel=True
            )
        if outcome is None:
            self._stop.set()
            self.store.interrupt()
            log.error(
                "store shutdown deadline passed; queued writes not saved",
                extra={"fields": {"writes": len(batch), "timeout_s": self._shutdown_timeout_s}},
            )
            outcome = _Outcome(written=0, batches=0, failed=batch)
        self._settle(batch, outcome)

    def _settle(self, batch: Sequence[StoreMessage], outcome: _Outcome) -> None:
        if outcome.failed:
            self._unsaved.add(outcome.failed, outcome.error)
        self._unsaved.report(trio.current_time())
        count = len(batch)
        self._written += outcome.written
        self._batches += outcome.batches
        self._failures += outcome.failures
        self._settled += count
        self._progress.set()
        self._progress = trio.Event()
