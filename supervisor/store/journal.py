"""The audit journal: a call's audit row is on disk before the call is answered.

Why: the store actor writes rows to SQLite in batches, behind the answers, so a kill of
the supervisor under load lost the rows of calls whose clients already had their
answer. Now every row is first appended to this instance's journal with one
``write()``, and the call's answer waits for that write (not for SQLite); the store
actor still folds the rows into SQLite in batches.

Where: ``<state_dir>/journal/<instance id>.<n>.jsonl`` (files 0600, directory 0700),
segments n = 1, 2, …. The instance id is the instance lock's
(``actors.transports.instances``), so instances sharing a state directory never touch
each other's journals; a later instance folds the journal of a dead one
(``supervisor.store.replay``).

Format: one JSON object per line, the audit row's fields (``AuditRow``) with ``record``,
the line's unique id ``<instance id>.<counter>``; SQLite keeps it unique, so folding a
line twice inserts one row. A call that reaches its server, or waits for an approval,
writes two lines with one id: at its start the row it leaves if it never ends (outcome
``interrupted``, duration 0), at its end the real row. The later line wins.

Durability: ``write()`` puts the line in the kernel's page cache, which outlives the
process (SIGKILL, OOM) but not the machine. There is no fsync (it costs milliseconds
per call), so a power loss or kernel crash can lose the rows of the last seconds (dirty
pages reach the disk within about 30 s), as SQLite in WAL mode with synchronous=NORMAL
can lose its last commits.

On the event loop, not in a thread: a write of one ~300-byte line to the page cache
costs about 1.5 µs, while handing the row line to a worker thread doubled a sequential
call and cut the throughput to a fifth (benchmarks/RESULTS.md). The write keeps the GIL
(``_write_holding_the_gil``). A disk that hangs would stall the loop; the state
directory belongs on a local disk anyway.

Segments: at ``SEGMENT_BYTES`` (4 MiB) the segment is closed and the next one begins
with the start lines of the calls still in flight. A closed segment is deleted once the
store actor has committed every row in it; when a commit failed or a row was dropped,
the segment is folded into SQLite from its file first.

A full disk: a write that fails (ENOSPC, EIO, …) keeps the line in memory, in order,
and the call is answered all the same. At most ``MAX_PENDING`` lines (10,000, about
3 MB) wait; beyond that new lines are dropped and counted. Every ``RETRY_S`` (1 s) the
journal tries again; once the lines are written it closes the segment, so that what
SQLite missed meanwhile is folded in from the file. ``pending`` and ``dropped`` feed
the metrics, and ``/v1/health`` says ``degraded`` while lines wait.

A database that refuses rows (its disk is full too): each row the store actor could
not commit is settled ``False`` with the reason, and waits in the journal until its
segment is folded in. While rows wait, one line says how many and why, at most every
``REPORT_EVERY_S`` (10 s), and one line says when the database has them all again:
nothing is lost, so nothing is called lost (only ``dropped`` rows are).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import itertools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import trio

from actors.log_events import get_logger
from supervisor.store.errors import StoreError, failure_text
from supervisor.store.receipts import InMemory, Segment
from supervisor.store.records import AuditRow

log = get_logger("supervisor.store.journal")

JOURNAL_DIR = "journal"
SUFFIX = ".jsonl"
SEGMENT_BYTES = 4 << 20
MAX_PENDING = 10_000
RETRY_S = 1.0
REPORT_EVERY_S = 10.0
_FLUSH_LINES = 256  # backlog lines per write() when catching up

Fold = Callable[[list[Path]], Awaitable[object]]


def _write_holding_the_gil() -> Callable[[int, bytes], int]:
    """``write(2)`` through ctypes.PyDLL, which keeps the GIL during the call; else
    ``os.write``.

    Why: ``os.write`` releases the GIL, and under load the store actor's thread is
    always waiting for it. It takes the GIL during the microsecond the write lasts, and
    the event loop then waits for it to give the GIL back. That showed as thousands of
    context switches more per 10,000 calls (benchmarks/RESULTS.md). Writing a few
    hundred bytes into the page cache is no reason to let go of the GIL.
    """
    try:
        import ctypes

        libc_write = ctypes.PyDLL(None, use_errno=True).write
    except (ImportError, OSError, AttributeError):
        return os.write
    libc_write.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
    libc_write.restype = ctypes.c_ssize_t

    def write(fd: int, data: bytes) -> int:
        while True:
            written: int = libc_write(fd, data, len(data))
            if written >= 0:
                return written
            code = ctypes.get_errno()
            if code != errno.EINTR:
                raise OSError(code, os.strerror(code))

    return write


_write = _write_holding_the_gil()


def write_line(fd: int, data: bytes) -> int:
    """Every journal write goes through here: the seam where tests inject faults."""
    return _write(fd, data)


def journal_dir(state_dir: Path) -> Path:
    """Where every instance's journal lives."""
    return Path(state_dir) / JOURNAL_DIR


def encode(row: AuditRow) -> bytes:
    """One journal line (``trace_id``, ``person`` and ``replica`` only when the row has them: lines
    without stay as short as before, and old lines read the same)."""
    fields = {
        "record": row.record,
        "at": row.at,
        "tenant": row.tenant,
        "session": row.session,
        "tool": row.tool,
        "server": row.server,
        "decision": row.decision,
        "outcome": row.outcome,
        "duration_ms": row.duration_ms,
        "args_sha256": row.args_sha256,
        "args_bytes": row.args_bytes,
        "result_bytes": row.result_bytes,
    }
    if row.trace_id is not None:
        fields["trace_id"] = row.trace_id
    if row.person is not None:
        fields["person"] = row.person
    if row.replica is not None:
        fields["replica"] = row.replica
    if row.cancelled_by is not None:
        fields["cancelled_by"] = row.cancelled_by
    return orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE)


class AuditJournal:
    """This instance's journal. ``started`` and ``finished`` write at once, on the event
    loop; ``run`` (a task) retries after failures and deletes segments SQLite holds."""

    def __init__(
        self,
        state_dir: Path,
        instance_id: str,
        *,
        segment_bytes: int | None = None,
        max_pending: int | None = None,
        retry_s: float | None = None,
    ) -> None:
        self.directory = journal_dir(state_dir)
        self.instance_id = instance_id
        self.dropped = 0
        self._segment_bytes = SEGMENT_BYTES if segment_bytes is None else segment_bytes
        self._max_pending = MAX_PENDING if max_pending is None else max_pending
        self._retry_s = RETRY_S if retry_s is None else retry_s
        self._ids = itertools.count(1)
        self._fd = -1
        self._size = 0
        self._segment: Segment | None = None
        self._closed: list[Segment] = []
        self._in_flight: dict[str, bytes] = {}  # start lines of calls not ended yet
        self._backlog: collections.deque[bytes] = collections.deque()
        self._failing: str | None = None
        self._in_memory = InMemory(self._poke)
        self._why = ""  # why SQLite last refused rows, or a fold failed
        self._reported_at: float | None = None  # when rows waiting for SQLite were last told
        self._wake = trio.Event()
        self._stopped = trio.Event()
        self._scope: trio.CancelScope | None = None
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._rotate()

    # ---------------------------------------------------------------- the call path

    @property
    def pending(self) -> int:
        """Lines waiting in memory because the disk refused them."""
        return len(self._backlog)

    @property
    def waiting(self) -> int:
        """Rows SQLite refused that wait in the journal to be folded in."""
        segments = [*self._closed, *([self._segment] if self._segment is not None else [])]
        return self._in_memory.missed + sum(segment.missed for segment in segments)

    @property
    def degraded(self) -> bool:
        """Whether rows are waiting for the disk (or the journal has no file)."""
        return bool(self._backlog) or self._fd < 0

    def new_id(self) -> str:
        """A record id no other line of any instance has."""
        return f"{self.instance_id}.{next(self._ids)}"

    def started(self, row: AuditRow) -> None:
        """A call goes out or waits for an approval: write the row it leaves if it never
        ends (outcome ``interrupted``)."""
        assert row.record is not None
        line = encode(row)
        self._in_flight[row.record] = line
        self._append(line, False)

    def finished(self, row: AuditRow) -> Segment | InMemory | None:
        """A call ended: write its row. Returns the receipt the store actor must settle
        the row with: the segment it went to, or ``InMemory`` while it waits for the
        disk; None when it was dropped (the memory queue is full: the journal lost it)."""
        if row.record is not None:
            self._in_flight.pop(row.record, None)
        return self._append(encode(row), True)

    def _append(self, line: bytes, is_row: bool) -> Segment | InMemory | None:
        segment = self._segment
        if self._backlog or segment is None:
            return self._queue(line)
        try:
            written = write_line(self._fd, line)
        except OSError as exc:
            self._trouble(exc)
            return self._queue(line)
        self._size += written
        if written < len(line):  # the disk filled up within the line: the rest waits
            self._trouble(OSError(f"short write ({written} of {len(line)} bytes)"))
            self._backlog.append(line[written:])
            return self._in_memory
        if is_row:
            segment.unsettled += 1
        if self._size >= self._segment_bytes:
            self._rotate()
        return segment if is_row else None

    def _queue(self, line: bytes) -> InMemory | None:
        if len(self._backlog) >= self._max_pending:
            if not self.dropped:
                log.error(
                    "audit rows dropped: the journal cannot write and its memory queue is full",
                    extra={"fields": {"max_pending": self._max_pending, "path": str(self.directory)}},
                )
            self.dropped += 1
            return None
        self._backlog.append(line)
        self._wake.set()
        return self._in_memory

    def _trouble(self, exc: OSError) -> None:
        if self._failing is None:
            log.error(
                "audit journal write failed; rows wait in memory",
                extra={
                    "fields": {
                        "error": str(exc),
                        "path": str(self.directory),
                        "max_pending": self._max_pending,
                    }
                },
            )
        self._failing = str(exc)
        self._wake.set()

    # ---------------------------------------------------------------- segments

    def _path(self, index: int) -> Path:
        return self.directory / f"{self.instance_id}.{index}{SUFFIX}"

    def _rotate(self) -> bool:
        """Close the current segment and start the next with the start lines of the
        calls in flight (so a closed segment is never needed for those)."""
        index = self._segment.index + 1 if self._segment is not None else 1
        path = self._path(index)
        carried = b"".join(self._in_flight.values())
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            self._trouble(exc)
            return False
        try:
            if carried and write_line(fd, carried) != len(carried):
                raise OSError("short write")
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            self._trouble(exc)
            return False
        old = self._segment
        if old is not None:
            os.close(self._fd)
            old.closed = True
            self._closed.append(old)
            self._wake.set()
        self._fd, self._size = fd, len(carried)
        self._segment = Segment(index, path, self._poke)
        if self._failing is not None and not self._backlog:
            self._recovered()
        return True

    def _poke(self, why: str | None = None) -> None:
        if why:
            self._why = why
        self._wake.set()  # the Event of the moment: ``run`` replaces it after each wake-up

    def _flush(self) -> bool:
        """Write the lines waiting in memory, in order; True when none is left."""
        if self._segment is None and not self._rotate():
            return False
        segment = self._segment
        assert segment is not None
        while self._backlog:
            lines = list(itertools.islice(self._backlog, _FLUSH_LINES))
            data = b"".join(lines)
            try:
                written = write_line(self._fd, data)
            except OSError as exc:
                self._trouble(exc)
                return False
            self._size += written
            segment.refold = True  # their rows may have missed SQLite while they waited
            for line in lines:
                if written < len(line):
                    if written:
                        self._backlog[0] = line[written:]
                    self._trouble(OSError("short write"))
                    return False
                written -= len(line)
                self._backlog.popleft()
        # Their rows that SQLite refused wait in this segment now.
        segment.missed += self._in_memory.missed
        self._in_memory.missed = 0
        if self._failing is not None:
            self._recovered()
        return True

    def _recovered(self) -> None:
        log.info("audit journal writes again", extra={"fields": {"path": str(self.directory)}})
        self._failing = None

    async def _tend(self, fold: Fold) -> bool:
        """Catch up after a failure and delete the segments SQLite holds; True when
        nothing is left to retry."""
        settled = not self._backlog or self._flush()
        current = self._segment
        if settled and current is not None and current.refold and self._size:
            settled = self._rotate()  # so that what SQLite missed is folded in now
        done = [segment for segment in self._closed if not segment.unsettled]
        refold = [segment.path for segment in done if segment.refold]
        if refold:
            try:
                await fold(refold)
            except (StoreError, OSError) as exc:
                self._why = failure_text(exc)
                return False
        for segment in done:
            with contextlib.suppress(FileNotFoundError):
                segment.path.unlink()
            self._closed.remove(segment)
        return settled

    # ---------------------------------------------------------------- the task

    async def run(self, fold: Fold, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Retry and tidy until ``aclose``. ``fold(paths)`` must write the complete rows
        of those files to SQLite (idempotently; start lines are left out)."""
        try:
            with trio.CancelScope() as self._scope:
                task_status.started()
                while True:
                    await self._wake.wait()
                    self._wake = trio.Event()
                    tended = await self._tend(fold)
                    self._report()
                    if not tended:
                        await trio.sleep(self._retry_s)
                        self._wake.set()
        finally:
            self._stopped.set()

    def _report(self) -> None:
        """Say what is true of the rows SQLite refused: how many wait in the journal (one
        line at most every ``REPORT_EVERY_S``), or that it holds them all again."""
        waiting, now = self.waiting, trio.current_time()
        if waiting and (self._reported_at is None or now - self._reported_at >= REPORT_EVERY_S):
            self._reported_at = now
            # Not lost, and not said to be: they are folded in once the database writes.
            fields = {
                "rows": waiting,
                "error": self._why,
                "retry_s": self._retry_s,
                "path": str(self.directory),
            }
            log.warning("audit rows wait in the journal for the database", extra={"fields": fields})
        elif not waiting and self._reported_at is not None:
            self._reported_at = None
            log.info(
                "audit rows folded in from the journal: the database holds every row again",
                extra={"fields": {"path": str(self.directory)}},
            )

    async def aclose(self, fold_all: Fold) -> None:
        """The instance ends (its calls have ended, the store actor has stopped): stop
        ``run``, write what waits, and delete the journal. ``fold_all(paths)`` writes
        every row of those files to SQLite, start lines as ``interrupted`` rows, when
        SQLite may miss some; if that fails the files stay for the next start to fold."""
        if self._scope is not None:
            self._scope.cancel()
            await self._stopped.wait()
        if self._backlog:
            self._flush()
        if self._backlog:
            log.error(
                "audit rows lost: the journal could not write them before the supervisor stopped",
                extra={"fields": {"lost": len(self._backlog), "path": str(self.directory)}},
            )
        segments = [*self._closed, *([self._segment] if self._segment is not None else [])]
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._segment, self._closed = None, []
        needs_fold = bool(self._in_flight) or any(s.refold or s.unsettled for s in segments)
        paths = [s.path for s in segments]
        if needs_fold:
            try:
                await fold_all(paths)
            except (StoreError, OSError):
                log.error("audit journal kept for the next start: folding it failed", exc_info=True)
                return
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
