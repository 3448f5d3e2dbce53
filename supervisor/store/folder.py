"""The folder: a helper process that folds this instance's audit journal into the store.

Why a process: the serving process writes each call's row to its journal with one
``write()`` before the answer (``journal.py``); inserting the rows into SQLite or
PostgreSQL there too meant a worker thread competing with the event loop for the GIL
(benchmarks/RESULTS.md, "Issue 37: the journal folded by a helper process"). Here the
inserts run in a process of their own, plain blocking Python, started and watched by
``folding.py``.

What it does: it tails ``<state_dir>/journal/<instance>.<n>.jsonl`` from the oldest
segment on, takes complete lines (a torn last line waits for its newline), leaves out
start lines (outcome ``interrupted``: the call is still running) and inserts the rest
in one transaction per pass (idempotent: the audit table skips record ids it holds,
so a restarted folder reads from the oldest segment again and adds nothing twice). A
closed segment (a newer one exists, and it was read to its end) is deleted once its
rows are committed. A database error does not advance it: it reports the error and
how many rows wait, and tries again every ``retry_s``.

Protocol: its settings come as one JSON line on stdin (never argv, which any local
user can read in /proc: a PostgreSQL URL holds a password); then each byte on stdin
is a wake-up ("lines were written"), and end of file asks for a last pass and an exit.
Each pass that commits or fails writes one JSON line on stdout: ``segment`` and
``offset`` (everything before that point is committed), ``waiting`` (rows the
database refused) and ``error`` (why, or null).
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
from pathlib import Path
from typing import IO, Any

import attrs
import orjson

from supervisor.store.database import Store
from supervisor.store.errors import StoreError, failure_text
from supervisor.store.journal_files import RETRY_S, instance_segments, journal_dir
from supervisor.store.records import AuditRow
from supervisor.store.replay import INTERRUPTED, parse_line

IDLE_S = 1.0
"""Without a wake-up, it looks at the journal this often anyway (a lost byte costs a second)."""
NICE = 10
"""The folder yields the CPU to the serving process and its servers: its rows may wait
a little, their calls should not (benchmarks/RESULTS.md, issue 37, measured it beside
normal priority: the calls were the same within the rounds' spread)."""
BATCH_ROWS = 20_000
"""A pass reads no further segment once it holds this many rows (after a long outage,
one transaction per few segments, not one for all of them)."""


@attrs.frozen(slots=True)
class FolderSettings:
    """What the folder needs; sent on its stdin as JSON (``encode``)."""

    state_dir: str
    instance: str
    sqlite: str | None = None
    """The SQLite file; else ``url``, a PostgreSQL store."""
    url: str | None = None
    retry_s: float = RETRY_S
    busy_timeout_ms: int = 5_000

    def encode(self) -> bytes:
        return orjson.dumps(attrs.asdict(self), option=orjson.OPT_APPEND_NEWLINE)

    @classmethod
    def decode(cls, line: bytes) -> FolderSettings:
        """Raises ValueError naming what is wrong."""
        try:
            data = orjson.loads(line)
            settings = cls(**data)
        except (orjson.JSONDecodeError, TypeError) as exc:
            raise ValueError(f"audit folder: its settings line on stdin is not valid ({exc})") from None
        if (settings.sqlite is None) == (settings.url is None):
            raise ValueError("audit folder: its settings need exactly one of sqlite and url")
        return settings


@attrs.define
class Batch:
    """What one pass read: the rows to commit and where the reading ended."""

    rows: dict[str, AuditRow] = attrs.field(factory=dict)
    segment: int = 0
    offset: int = 0
    finished: list[Path] = attrs.field(factory=list)  # closed segments read to their end
    bad: int = 0
    more: bool = False  # stopped at ``BATCH_ROWS``: segments are left to read now


class Folder:
    """The folding loop, with its position (segment, offset) in this instance's journal."""

    def __init__(self, settings: FolderSettings, out: IO[bytes]) -> None:
        self.settings = settings
        self.directory = journal_dir(Path(settings.state_dir))
        self.segment = 0  # 0: begin at the oldest segment there is
        self.offset = 0
        self._out = out
        self._store: Store | None = None
        self.failing = False

    def read(self) -> Batch:
        """The complete lines from the position on, across segments."""
        batch = Batch(segment=self.segment, offset=self.offset)
        segments = [
            (index, path)
            for index, path in instance_segments(self.directory, self.settings.instance)
            if index >= self.segment
        ]
        for k, (index, path) in enumerate(segments):
            closed = k + 1 < len(segments)  # a newer segment exists: this one is written to its end
            start = batch.offset if index == batch.segment else 0
            try:
                with path.open("rb") as file:
                    file.seek(start)
                    data = file.read()
            except FileNotFoundError:
                data = b""
            end = data.rfind(b"\n") + 1
            for line in data[:end].splitlines():
                row = parse_line(line)
                if row is None or row.record is None:
                    batch.bad += bool(line.strip())
                elif row.outcome != INTERRUPTED:
                    batch.rows.pop(row.record, None)
                    batch.rows[row.record] = row
            if closed:
                batch.bad += bool(data[end:].strip())  # never completed: no newline will come
                batch.finished.append(path)
                batch.segment, batch.offset = segments[k + 1][0], 0
                if len(batch.rows) >= BATCH_ROWS:
                    batch.more = True
                    break
            else:
                batch.segment, batch.offset = index, start + end
        return batch

    def _open(self) -> Store:
        if self._store is None:
            settings = self.settings
            if settings.url is not None:
                from supervisor.store.postgres import open_postgres

                self._store = open_postgres(settings.url)
            else:
                assert settings.sqlite is not None
                self._store = Store.open(settings.sqlite, busy_timeout_ms=settings.busy_timeout_ms)
        return self._store

    def fold(self) -> float:
        """One pass: commit what is new, delete closed segments, report. How long to wait
        before the next: ``retry_s`` when the database refused (nothing advanced), 0
        when segments are left to read now, else ``IDLE_S``."""
        batch = self.read()
        moved = (batch.segment, batch.offset) != (self.segment, self.offset)
        if batch.rows:
            try:
                self._open().add_audit(list(batch.rows.values()))
            except (StoreError, OSError) as exc:
                self.failing = True
                self.report(waiting=len(batch.rows), error=failure_text(exc))
                return self.settings.retry_s
        for path in batch.finished:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self.segment, self.offset = batch.segment, batch.offset
        if moved or self.failing or batch.bad:
            self.failing = False
            self.report(waiting=0, error=None, bad=batch.bad)
        return 0.0 if batch.more else IDLE_S

    def report(self, *, waiting: int, error: str | None, bad: int = 0) -> None:
        line: dict[str, Any] = {
            "segment": self.segment,
            "offset": self.offset,
            "waiting": waiting,
            "error": error,
        }
        if bad:
            line["bad"] = bad
        self._out.write(orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE))
        self._out.flush()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def serve(folder: Folder, wakes: int) -> None:
    """Fold on every wake-up (bytes on ``wakes``), at least every ``IDLE_S``, and every
    ``retry_s`` while the database refuses; at end of file a last pass, then return."""
    while True:
        ready, _, _ = select.select([wakes], [], [], folder.fold())
        if ready and not os.read(wakes, 4096):
            while not folder.fold():  # 0: segments are left to read now
                pass
            return


def main() -> int:
    """``python -m supervisor.store.folder``, its settings on stdin (see the module)."""
    stdin = sys.stdin.buffer
    line = b""
    while not line.endswith(b"\n"):  # unbuffered: the wake-ups after it stay in the pipe
        byte = os.read(stdin.fileno(), 1)
        if not byte:
            break
        line += byte
    try:
        settings = FolderSettings.decode(line)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    with contextlib.suppress(OSError):
        os.nice(NICE)
    folder = Folder(settings, sys.stdout.buffer)
    try:
        serve(folder, stdin.fileno())
    except KeyboardInterrupt:
        return 1
    finally:
        folder.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
