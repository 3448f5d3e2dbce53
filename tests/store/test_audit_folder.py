"""The folder: a real process that folds one instance's journal into the store.

Each test starts ``folder_command()`` (what the supervisor spawns) with its settings on
stdin, writes journal lines as the journal does (``encode``), wakes it with a byte, and
reads its reports on stdout and the rows in SQLite. The supervisor's side (spawned,
restarted, killed with its parent) is at the end.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from actors.transports.pidfiles import pids_dir, read_pidfile
from supervisor import Supervisor
from supervisor.settings.model import Config
from supervisor.store import AuditRow, Store
from supervisor.store import folder as folder_module
from supervisor.store.folder import FolderSettings
from supervisor.store.folding import NAME, folder_command, folder_settings
from supervisor.store.journal import encode, journal_dir
from tests.support.admin import until
from tests.support.inprocess import running
from tests.support.killed import child_to_kill

INSTANCE = "4242-0123456789ab"


def row(n: int, outcome: str = "ok") -> AuditRow:
    return AuditRow(
        1_700_000_000.0 + n, "t", "s", "srv_tool", "srv", "allow", outcome, 0, "ab" * 32, n, 0, f"i.{n}"
    )


class Folder:
    """A folder process and its journal directory, for the block."""

    def __init__(self, state: Path, settings: FolderSettings) -> None:
        self.state = state
        self.process = subprocess.Popen(
            folder_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.process.stdin is not None
        self.process.stdin.write(settings.encode())
        self.process.stdin.flush()

    def segment(self, index: int) -> Path:
        return journal_dir(self.state) / f"{INSTANCE}.{index}.jsonl"

    def append(self, index: int, data: bytes) -> None:
        with self.segment(index).open("ab") as file:
            file.write(data)

    def wake(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"w")
        self.process.stdin.flush()

    def report(self, timeout_s: float = 10) -> dict[str, Any]:
        """The folder's next report (fails after ``timeout_s``)."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        assert ready, "the folder said nothing"
        line = self.process.stdout.readline()
        assert line, self.process.stderr.read() if self.process.stderr else "it ended"
        report: dict[str, Any] = orjson.loads(line)
        return report

    def until(self, wanted: dict[str, Any], timeout_s: float = 10) -> dict[str, Any]:
        """Wake and read reports until one has the ``wanted`` fields."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.wake()
            report = self.report(max(0.01, deadline - time.monotonic()))
            if all(report.get(key) == value for key, value in wanted.items()):
                return report

    def end(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(10)


@contextlib.contextmanager
def folder(state: Path, **settings: Any) -> Iterator[Folder]:
    journal_dir(state).mkdir(parents=True, exist_ok=True)
    Store.open(state / "supervisor.db").close()  # the supervisor opened and migrated it first
    chosen = {"sqlite": str(state / "supervisor.db"), **settings}
    running_folder = Folder(state, FolderSettings(state_dir=str(state), instance=INSTANCE, **chosen))
    try:
        yield running_folder
    finally:
        if running_folder.process.poll() is None:
            running_folder.process.kill()
        running_folder.process.wait(10)
        for stream in (running_folder.process.stdout, running_folder.process.stderr):
            assert stream is not None
            stream.close()


def stored(state: Path) -> list[tuple[str | None, str]]:
    with Store.open(state / "supervisor.db") as store:
        return sorted((r.record, r.outcome) for r in store.audit_rows(limit=10_000))


def test_finished_rows_reach_sqlite_start_lines_do_not_and_a_torn_line_waits(tmp_path: Path) -> None:
    with folder(tmp_path) as running_folder:
        line = encode(row(2))
        running_folder.append(
            1, encode(row(1, "interrupted")) + encode(row(1)) + encode(row(3, "interrupted"))
        )
        running_folder.append(1, line[:30])  # torn: the rest of it is not written yet
        size = running_folder.segment(1).stat().st_size
        report = running_folder.until({"offset": size - 30})
        assert report == {"segment": 1, "offset": size - 30, "waiting": 0, "error": None}
        assert stored(tmp_path) == [("i.1", "ok")], "a running call's start line is no row"
        running_folder.append(1, line[30:])
        running_folder.until({"offset": size - 30 + len(line)})
        assert stored(tmp_path) == [("i.1", "ok"), ("i.2", "ok")]
        assert running_folder.end() == 0


def test_a_closed_segment_is_deleted_once_its_rows_are_committed(tmp_path: Path) -> None:
    with folder(tmp_path) as running_folder:
        running_folder.append(1, encode(row(1)) + encode(row(2)))
        running_folder.until({"segment": 1, "offset": running_folder.segment(1).stat().st_size})
        assert running_folder.segment(1).exists(), "the newest segment stays: more may come"
        running_folder.append(2, encode(row(3)))
        running_folder.until({"segment": 2})
        assert not running_folder.segment(1).exists() and running_folder.segment(2).exists()
        assert stored(tmp_path) == [("i.1", "ok"), ("i.2", "ok"), ("i.3", "ok")]
        assert running_folder.end() == 0


def test_a_locked_database_holds_the_folder_back_then_it_catches_up(tmp_path: Path) -> None:
    with folder(tmp_path, busy_timeout_ms=50, retry_s=0.1) as running_folder:
        holder = sqlite3.connect(tmp_path / "supervisor.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        running_folder.append(1, encode(row(1)) + encode(row(2)))
        refused = running_folder.until({"waiting": 2})
        assert refused["offset"] == 0 and "database is locked" in refused["error"], refused
        running_folder.append(2, encode(row(3)))
        running_folder.until({"waiting": 3})  # it retries, and counts what came meanwhile
        assert running_folder.segment(1).exists(), "nothing is deleted before its rows are in"
        holder.execute("ROLLBACK")
        holder.close()
        running_folder.until({"segment": 2, "waiting": 0, "error": None})
        assert stored(tmp_path) == [("i.1", "ok"), ("i.2", "ok"), ("i.3", "ok")]
        assert not running_folder.segment(1).exists()
        assert running_folder.end() == 0


def test_a_folder_killed_and_started_again_adds_no_row_twice_and_loses_none(tmp_path: Path) -> None:
    with folder(tmp_path) as first:
        first.append(1, b"".join(encode(row(n)) for n in range(50)))
        first.until({"offset": first.segment(1).stat().st_size})
        first.append(1, b"".join(encode(row(n)) for n in range(50, 80)))
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.wait(10)
    with folder(tmp_path) as second:  # begins at the oldest segment again
        second.append(2, b"".join(encode(row(n)) for n in range(80, 100)))
        second.until({"segment": 2, "offset": second.segment(2).stat().st_size})
        assert second.end() == 0
    rows = stored(tmp_path)
    assert len(rows) == 100 and len(set(rows)) == 100


def test_settings_come_on_stdin_never_in_argv_and_bad_ones_are_refused(tmp_path: Path) -> None:
    argv = " ".join(folder_command())
    assert str(tmp_path) not in argv and "sqlite" not in argv
    url = "postgresql://user:secret@127.0.0.1:1/db"
    settings = folder_settings(tmp_path, INSTANCE, url)
    assert settings.url == url and settings.sqlite is None  # the password only in the settings line
    for line, says in (
        (b"not json\n", "its settings line on stdin is not valid"),
        (orjson.dumps({"state_dir": "x", "instance": "y"}) + b"\n", "exactly one of sqlite and url"),
        (orjson.dumps({"state_dir": "x"}) + b"\n", "its settings line on stdin is not valid"),
    ):
        done = subprocess.run(folder_command(), input=line, capture_output=True, timeout=30, check=False)
        assert done.returncode == 2 and says in done.stderr.decode(), done.stderr


def test_after_a_long_outage_a_pass_takes_a_few_segments_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process (the loop is plain Python): one transaction per ``BATCH_ROWS``-ish
    rows, the next pass at once."""
    monkeypatch.setattr(folder_module, "BATCH_ROWS", 4)
    journal_dir(tmp_path).mkdir()
    for index in range(1, 5):  # three closed segments of 3 rows, and the newest
        rows = b"".join(encode(row(index * 10 + n)) for n in range(3))
        (journal_dir(tmp_path) / f"{INSTANCE}.{index}.jsonl").write_bytes(rows)
    out = io.BytesIO()
    settings = FolderSettings(
        state_dir=str(tmp_path), instance=INSTANCE, sqlite=str(tmp_path / "supervisor.db")
    )
    running_folder = folder_module.Folder(settings, out)
    try:
        assert running_folder.fold() == 0.0, "six rows in two segments: the rest at once"
        assert (running_folder.segment, running_folder.offset) == (3, 0)
        assert running_folder.fold() == folder_module.IDLE_S
        assert running_folder.segment == 4 and len(stored(tmp_path)) == 12
    finally:
        running_folder.close()
    assert [orjson.loads(line)["segment"] for line in out.getvalue().splitlines()] == [3, 4]


# ------------------------------------------------------------------ under a supervisor


async def test_a_folder_that_dies_is_started_again_and_no_row_is_lost_or_doubled(tmp_path: Path) -> None:
    async with running(tmp_path) as run:
        folding = run.sup.store.folding
        assert folding is not None
        for n in range(5):
            assert (await run.turn.call("fake_echo", {"n": n})).ok
        assert len(await run.rows()) == 5
        spawned = folding._spawned
        assert spawned is not None
        spawned.process.kill()
        for n in range(5, 10):
            assert (await run.turn.call("fake_echo", {"n": n})).ok
        await until(lambda: folding._spawned not in (None, spawned), 20)
        rows = await run.rows()
        assert len(rows) == 10 and len({r.record for r in rows}) == 10
    assert not list(journal_dir(tmp_path).iterdir()), "a clean stop leaves no journal"
    assert not list(pids_dir(tmp_path).iterdir()), "and no folder: its pidfile went with it"


CHILD = """
import sys, trio
from actors.spec import ServerSpec, Start
from supervisor import Supervisor
from supervisor.settings.model import Config

async def main():
    async with Supervisor.open(Config(servers=()), state_dir=sys.argv[1]) as sup:
        while sup.store.folding.pid is None:
            await trio.sleep(0.01)
        print(sup.store.folding.pid, flush=True)
        await trio.sleep_forever()

trio.run(main)
"""


def test_a_killed_supervisor_leaves_no_folder_and_the_next_start_folds_its_journal(tmp_path: Path) -> None:
    with child_to_kill(CHILD, tmp_path) as child:
        assert child.stdout is not None
        pid = int(child.stdout.readline())
        (pidfile,) = pids_dir(tmp_path).iterdir()
        record = read_pidfile(pidfile)
        assert record is not None and (record.pid, record.server) == (pid, NAME)
        (journal,) = journal_dir(tmp_path).iterdir()
        journal.write_bytes(encode(row(1)) + encode(row(2, "interrupted")))  # as if it had served calls
        os.kill(child.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid):
        assert time.monotonic() < deadline, "the folder outlived its supervisor"
        time.sleep(0.02)

    async def start_again() -> None:
        async with Supervisor.open(Config(servers=()), state_dir=tmp_path):
            pass

    trio.run(start_again)
    assert stored(tmp_path) == [("i.1", "ok"), ("i.2", "interrupted")]
    assert not list(journal_dir(tmp_path).iterdir())


def _state(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    return "Z"
