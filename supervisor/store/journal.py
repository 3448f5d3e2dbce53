"""The audit journal: a call's audit row is on disk before the call is answered.

Why: rows written to SQLite in batches, behind the answers, were lost by a kill of the
supervisor under load although their clients had their answer. Every row is appended
to this instance's journal with one ``write()``, and the call's answer waits for that
write (not for the database). The journal is the record: a helper process, the folder,
reads it and inserts the rows into the store (``folder.py``, watched by ``folding.py``),
so the database's inserts never compete with the event loop for the GIL.

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
call and cut the throughput to a fifth (benchmarks/RESULTS.md). A disk that hangs
would stall the loop; the state directory belongs on a local disk anyway.

Segments: at ``SEGMENT_BYTES`` (4 MiB) the segment is closed and the next one begins
with the start lines of the calls still in flight. The folder deletes a closed segment
once it has committed every row in it.

A full disk: a write that fails (ENOSPC, EIO, …) keeps the line in memory, in order,
and the call is answered all the same. At most ``MAX_PENDING`` lines (10,000, about
3 MB) wait; beyond that new lines are dropped and counted. Every ``RETRY_S`` (1 s) the
journal tries again; the folder reads the lines once they are in the file. ``pending``
and ``dropped`` feed the metrics, and ``/v1/health`` says ``degraded`` while lines wait.

A database that refuses rows (its disk is full too): the folder does not move past
them; they wait in the journal, and ``waiting`` (set from the folder's reports,
``folding.py``) says how many.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from actors.log_events import get_logger
from supervisor.store.errors import StoreError
from supervisor.store.journal_files import RETRY_S, SUFFIX, instance_segments, journal_dir
from supervisor.store.journal_lines import LineFields, encode, encode_fields, line_fields
from supervisor.store.records import AuditRow

__all__ = [
    "RETRY_S",
    "SUFFIX",
    "AuditJournal",
    "LineFields",
    "encode",
    "encode_fields",
    "instance_segments",
    "journal_dir",
    "line_fields",
    "write_line",
]

log = get_logger("supervisor.store.journal")

SEGMENT_BYTES = 4 << 20
MAX_PENDING = 10_000
_FLUSH_LINES = 256  # backlog lines per write() when catching up

Fold = Callable[[list[Path]], Awaitable[object]]
Position = tuple[int, int]
"""(segment index, byte offset in it): how far the journal is written, or folded."""


write_line: Callable[[int, bytes], int] = os.write
"""Every journal write goes through here: the seam where tests inject faults.

``os.write`` itself, no wrapper: it lets go of the GIL for the microsecond the write
lasts, which cost when the store's worker thread inserted rows and always wanted the
GIL (the journal then wrote through ``ctypes.PyDLL`` to keep it); since the folder
process does the inserts no thread of ours wants it, and ``os.write`` measured about
1 µs a line cheaper (benchmarks/RESULTS.md, issue 37)."""


class AuditJournal:
    """This instance's journal. ``started`` and ``finished`` write at once, on the event
    loop; ``run`` (a task) retries after failures."""

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
        self.waiting = 0
        """Rows the database refused that wait in the journal (the folder's last report)."""
        self.on_write: Callable[[], None] = _nothing
        """Told after lines reached the file (the folding wakes its folder)."""
        self._segment_bytes = SEGMENT_BYTES if segment_bytes is None else segment_bytes
        self._max_pending = MAX_PENDING if max_pending is None else max_pending
        self._retry_s = RETRY_S if retry_s is None else retry_s
        self._ids = itertools.count(1)
        self._fd = -1
        self._size = 0
        self._index = 0  # the segment written now (0: none yet)
        self._in_flight: dict[str, bytes] = {}  # start lines of calls not ended yet
        self._backlog: collections.deque[bytes] = collections.deque()
        self._failing: str | None = None
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
    def degraded(self) -> bool:
        """Whether rows are waiting for the disk (or the journal has no file)."""
        return bool(self._backlog) or self._fd < 0

    @property
    def position(self) -> Position:
        """How far the journal is written: a folder at this position has every row so far."""
        return (self._index, self._size)

    def new_id(self) -> str:
        """A record id no other line of any instance has."""
        return f"{self.instance_id}.{next(self._ids)}"

    def started(self, row: AuditRow) -> None:
        """A call goes out or waits for an approval: write the row it leaves if it never
        ends (outcome ``interrupted``)."""
        assert row.record is not None
        self.started_line(row.record, encode(row))

    def finished(self, row: AuditRow) -> None:
        """A call ended: write its row (or queue it in memory while the disk refuses)."""
        self.finished_line(row.record, encode(row))

    def started_line(self, record: str, line: bytes) -> None:
        """``started`` for a line already encoded (``encode_fields``)."""
        self._in_flight[record] = line
        self._append(line)

    def finished_line(self, record: str | None, line: bytes) -> None:
        """``finished`` for a line already encoded (``encode_fields``)."""
        if record is not None:
            self._in_flight.pop(record, None)
        if self._append(line):
            self.on_write()

    def _append(self, line: bytes) -> bool:
        """Write ``line``; False when it waits in memory (or was dropped)."""
        if self._backlog or self._fd < 0:
            self._queue(line)
            return False
        try:
            written = write_line(self._fd, line)
        except OSError as exc:
            self._trouble(exc)
            self._queue(line)
            return False
        self._size += written
        if written < len(line):  # the disk filled up within the line: the rest waits
            self._trouble(OSError(f"short write ({written} of {len(line)} bytes)"))
            self._backlog.append(line[written:])
            return False
        if self._size >= self._segment_bytes:
            self._rotate()
        return True

    def _queue(self, line: bytes) -> None:
        if len(self._backlog) >= self._max_pending:
            if not self.dropped:
                log.error(
                    "audit rows dropped: the journal cannot write and its memory queue is full",
                    extra={"fields": {"max_pending": self._max_pending, "path": str(self.directory)}},
                )
            self.dropped += 1
            return
        self._backlog.append(line)
        self._wake.set()

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

    def segments(self) -> list[Path]:
        """This instance's segment files there are now, oldest first."""
        return [path for _, path in instance_segments(self.directory, self.instance_id)]

    def _rotate(self) -> bool:
        """Close the current segment and start the next with the start lines of the
        calls in flight (so a closed segment is never needed for those)."""
        index = self._index + 1
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
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._size, self._index = fd, len(carried), index
        if self._failing is not None and not self._backlog:
            self._recovered()
        return True

    def _flush(self) -> bool:
        """Write the lines waiting in memory, in order; True when none is left."""
        if self._fd < 0 and not self._rotate():
            return False
        while self._backlog:
            lines = list(itertools.islice(self._backlog, _FLUSH_LINES))
            data = b"".join(lines)
            try:
                written = write_line(self._fd, data)
            except OSError as exc:
                self._trouble(exc)
                return False
            self._size += written
            for line in lines:
                if written < len(line):
                    if written:
                        self._backlog[0] = line[written:]
                    self._trouble(OSError("short write"))
                    return False
                written -= len(line)
                self._backlog.popleft()
            self.on_write()
        if self._failing is not None:
            self._recovered()
        return True

    def _recovered(self) -> None:
        log.info("audit journal writes again", extra={"fields": {"path": str(self.directory)}})
        self._failing = None

    # ---------------------------------------------------------------- the task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write what waits in memory, every ``retry_s`` while the disk refuses, until ``aclose``."""
        try:
            with trio.CancelScope() as self._scope:
                task_status.started()
                while True:
                    await self._wake.wait()
                    self._wake = trio.Event()
                    if self._backlog and not self._flush():
                        await trio.sleep(self._retry_s)
                        self._wake.set()
        finally:
            self._stopped.set()

    async def aclose(self, fold_all: Fold, folded: Position | None = None) -> None:
        """The instance ends (its calls have ended, its folder has stopped): stop
        ``run``, write what waits, and delete the journal. When the folder had not
        ``folded`` it all, or calls are still in flight, ``fold_all(paths)`` writes every
        row of the files to the database first, start lines as ``interrupted`` rows; if
        that fails the files stay for the next start to fold."""
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
        written = self.position
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        paths = self.segments()
        if paths and (self._in_flight or folded is None or folded < written):
            try:
                await fold_all(paths)
            except (StoreError, OSError):
                log.error("audit journal kept for the next start: folding it failed", exc_info=True)
                return
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _nothing() -> None:
    """No one to tell."""
