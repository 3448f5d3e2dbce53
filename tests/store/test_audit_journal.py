"""The audit journal: rows on disk before answers, segments, a refusing disk, replay.

The fault-injection tests replace the journal's one write seam (``write_line``) with
one that fails like a full disk; a test on a small tmpfs fills a real one (it needs
the right to mount, and skips saying so without it). The kill -9 test of a real
supervisor process is in test_audit_kill.py.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio
import trio.testing

from actors.log_events import event_name, record_fields
from actors.transports.instances import InstanceLock, claim_dead_instances, instances_dir
from supervisor import Approval, ApprovalRequest
from supervisor import service as service_module
from supervisor.store import AddAudit, AuditRow, SaveToolList, SetPin, Store, StoreActor, StoreError
from supervisor.store import journal as journal_module
from supervisor.store.folder import FolderSettings
from supervisor.store.folding import Folding, folder_settings
from supervisor.store.journal import AuditJournal, journal_dir
from supervisor.store.replay import fold_journal, read_journal, recover_audit_journals
from tests.support.admin import until
from tests.support.inprocess import Running, running

INSTANCE = "4242-0123456789ab"
ALL_IN = "audit rows folded in from the journal: the database holds every row again"


def row(record: str, outcome: str = "ok", n: int = 0) -> AuditRow:
    return AuditRow(
        1_700_000_000.0 + n, "t", "s", "srv_tool", "srv", "allow", outcome, 0, "ab" * 32, n, 0, record
    )


async def rows_at_least(run: Running, count: int, timeout_s: float = 10) -> list[AuditRow]:
    """Poll SQLite until it holds ``count`` rows (the journal folds them in behind)."""
    with trio.fail_after(timeout_s):
        while True:
            rows = await run.rows()
            if len(rows) >= count:
                return rows
            await trio.sleep(0.05)


def segments(state_dir: Path) -> list[Path]:
    return sorted(journal_dir(state_dir).iterdir(), key=lambda p: int(p.name.split(".")[-2]))


def records(path: Path) -> list[tuple[str, str]]:
    rows, bad = read_journal([path])
    assert not bad
    return [(r.record or "", r.outcome) for r in rows.values()]


# ------------------------------------------------------------------ the journal alone


async def test_each_new_segment_begins_with_the_calls_still_in_flight(tmp_path: Path) -> None:
    journal = AuditJournal(tmp_path, INSTANCE, segment_bytes=1500)
    told: list[int] = []
    journal.on_write = lambda: told.append(1)
    long = row(journal.new_id(), "interrupted")
    journal.started(long)
    for n in range(12):
        journal.finished(row(journal.new_id(), n=n))
    files = segments(tmp_path)
    assert len(files) >= 3 and len(told) == 12, "each finished row is told (the folder's wake-up)"
    for later in files[1:]:  # each new segment starts with the call still in flight
        assert records(later)[0] == (long.record, "interrupted")
    assert sum(len(records(p)) for p in files) == 12 + len(files)
    assert journal.position == (len(files), files[-1].stat().st_size)


async def test_closing_folds_calls_still_in_flight_as_interrupted(tmp_path: Path) -> None:
    journal = AuditJournal(tmp_path, INSTANCE)
    everything: list[list[Path]] = []

    async def fold_all(paths: list[Path]) -> None:
        everything.append(paths)

    journal.started(row(journal.new_id(), "interrupted"))
    await journal.aclose(fold_all, journal.position)
    assert len(everything) == 1 and not list(journal_dir(tmp_path).iterdir())
    # With nothing in flight and everything folded by the folder, the files just go.
    quiet = AuditJournal(tmp_path, INSTANCE + "0")
    quiet.finished(row(quiet.new_id()))
    await quiet.aclose(fold_all, quiet.position)
    assert len(everything) == 1 and not list(journal_dir(tmp_path).iterdir())
    # What the folder had not folded yet is folded here.
    behind = AuditJournal(tmp_path, INSTANCE + "1")
    behind.finished(row(behind.new_id()))
    await behind.aclose(fold_all, (1, 0))
    assert len(everything) == 2 and not list(journal_dir(tmp_path).iterdir())


@contextlib.contextmanager
def refusing_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Journal writes fail with ENOSPC while the flag is set (and count the attempts)."""
    flag = [True]
    real = journal_module.write_line

    def write_line(fd: int, data: bytes) -> int:
        if flag[0]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(journal_module, "write_line", write_line)
    yield flag


async def test_a_short_write_continues_the_same_line(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = AuditJournal(tmp_path, INSTANCE)
    real = journal_module.write_line
    monkeypatch.setattr(journal_module, "write_line", lambda fd, data: real(fd, data[:40]))
    journal.finished(row(journal.new_id()))
    assert journal.pending == 1 and journal.degraded
    monkeypatch.setattr(journal_module, "write_line", real)
    journal.finished(row(journal.new_id(), n=1))
    async with trio.open_nursery() as nursery:
        await nursery.start(journal.run)
        await trio.sleep(journal_module.RETRY_S * 1.5)
        assert journal.pending == 0 and not journal.degraded
        nursery.cancel_scope.cancel()
    lines, bad = read_journal(segments(tmp_path))
    assert bad == 0 and [r.args_bytes for r in lines.values()] == [0, 1]


# ------------------------------------------------------------------ through the supervisor


async def _metrics(run: Running) -> dict[str, float]:
    status, body = await run.get("/metrics")
    assert status == 200
    found = {}
    for line in body.decode().splitlines():
        name, _, value = line.partition(" ")
        if name.startswith("mcp_supervisor_audit_rows"):
            found[name] = float(value)
    return found


async def _health(run: Running) -> dict[str, Any]:
    status, body = await run.get("/v1/health")
    assert status == 200
    data: dict[str, Any] = orjson.loads(body)
    return data


async def test_a_full_disk_answers_calls_keeps_rows_in_memory_and_catches_up(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "MAX_PENDING", 30)
    async with running(tmp_path) as run:
        assert (await run.turn.call("fake_echo", {"n": 0})).ok
        await run.sup.store.flush()
        assert (await _health(run))["status"] == "ok"
        with refusing_disk(monkeypatch) as journal_refuses:
            for n in range(1, 21):  # two lines a call: 15 calls fill the queue, 5 overflow it
                assert (await run.turn.call("fake_echo", {"n": n})).ok, "answered all the same"
            assert (await _health(run))["status"] == "degraded"
            assert await _metrics(run) == {
                "mcp_supervisor_audit_rows_pending": 30,
                "mcp_supervisor_audit_rows_dropped_total": 10,
            }
            await trio.sleep(5)  # retries fail quietly meanwhile
            assert run.sup.journal.pending == 30
            space_back = trio.current_time()
            journal_refuses[0] = False
            await until(lambda: not run.sup.journal.degraded)
            assert trio.current_time() - space_back <= journal_module.RETRY_S + 0.2
        assert (await _health(run))["status"] == "ok"
        # The rows that waited in memory reach the database from the journal.
        rows = await rows_at_least(run, 16)
        assert sorted(r.args_bytes for r in rows) == [7] * 10 + [8] * 6
        assert len(segments(tmp_path)) == 1


@contextlib.contextmanager
def holding(database: Path) -> Iterator[None]:
    """Another connection holds SQLite's write lock for the block (as an operator's
    ``sqlite3`` shell would): the folder's inserts fail with "database is locked"."""
    connection = sqlite3.connect(database, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        yield
        connection.execute("ROLLBACK")
    finally:
        connection.close()


@pytest.fixture
def impatient_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder waits 0.1 s for a locked database (not 5) and retries every 0.2 s."""
    real = service_module.folder_settings

    def settings(*args: Any) -> FolderSettings:
        return attrs.evolve(real(*args), busy_timeout_ms=100, retry_s=0.2)

    monkeypatch.setattr(service_module, "folder_settings", settings)


class Stamped(logging.Handler):
    """Keeps the store's and the journal's records with the Trio time each was logged at."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[float, logging.LogRecord]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((trio.current_time(), record))

    def named(self, event: str) -> list[tuple[float, dict[str, Any], logging.LogRecord]]:
        return [(at, record_fields(r), r) for at, r in self.records if event_name(r) == event]


@pytest.fixture
def store_log() -> Iterator[Stamped]:
    handler = Stamped()
    logger = logging.getLogger("supervisor.store")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def test_rows_a_locked_database_refuses_wait_in_the_journal_and_are_folded_in_later(
    tmp_path: Path, store_log: Stamped, impatient_folder: None
) -> None:
    """Real time, a real folder: each row is in the journal before its answer; while
    another connection holds the database, the folder says how many wait and why, and
    once it is free they are folded in, none lost and none called lost."""
    async with running(tmp_path) as run:
        assert (await run.turn.call("fake_echo", {"n": -1})).ok
        await run.sup.store.flush()
        with holding(tmp_path / "supervisor.db"):
            for n in range(5):
                assert (await run.turn.call("fake_echo", {"n": n})).ok
            assert not await run.sup.store.folding.flush(), "the folder says the database refused"
            await until(lambda: run.sup.journal.waiting == 5, timeout_s=10)
            assert (await _health(run))["status"] == "degraded"
            ((_, fields, record),) = store_log.named("audit rows wait in the journal for the database")
            assert fields["rows"] >= 1 and "database is locked" in fields["error"]
            assert record.levelno == logging.WARNING and record.exc_info is None
        await until(lambda: run.sup.journal.waiting == 0, timeout_s=10)
        rows = await run.rows()
        assert len(rows) == 6 and len({r.record for r in rows}) == 6, "every row folded in from the journal"
        assert (await _health(run))["status"] == "ok"
        said = [record.getMessage() for _, record in store_log.records]
        assert not [text for text in said if "lost" in text or "store write failed" in text], said
        assert (
            len(store_log.named("audit rows folded in from the journal: the database holds every row again"))
            == 1
        )


async def test_while_rows_wait_one_line_every_10_s_says_how_many_and_one_when_all_are_in(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, store_log: Stamped
) -> None:
    """The folder reports a refusal on every retry; the log says it once per 10 s."""
    journal = AuditJournal(tmp_path, INSTANCE)
    folding = Folding(journal, folder_settings(tmp_path, INSTANCE, None))
    began = trio.current_time()
    for second in range(35):
        folding._heard({"segment": 1, "offset": 0, "waiting": second + 1, "error": "database is locked"})
        await trio.sleep(1)
    folding._heard({"segment": 1, "offset": 900, "waiting": 0, "error": None})
    lines = store_log.named("audit rows wait in the journal for the database")
    assert [round(at - began) for at, _, _ in lines] == [0, 10, 20, 30]
    assert [fields["rows"] for _, fields, _ in lines] == [1, 11, 21, 31]
    assert journal.waiting == 0 and folding.folded == (1, 900)
    assert len(store_log.named(ALL_IN)) == 1


async def test_writes_no_journal_holds_are_said_not_saved_once_per_10_s(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path, store_log: Stamped
) -> None:
    """What the database refuses that no journal holds is lost indeed: one line every
    10 s counts it by kind, with the database's error (no traceback: a full disk is a
    condition, not a bug); an audit row the journal dropped is called lost."""

    class FullDisk(Store):
        def transaction(self) -> Any:
            raise StoreError("write failed") from sqlite3.OperationalError("database or disk is full")

    with FullDisk.open(tmp_path / "db.sqlite") as store:
        actor = StoreActor(store)
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            began = trio.current_time()
            for second in range(25):
                actor.submit(SetPin("fs", "read", f"h{second}"))
                actor.submit(AddAudit(row(f"r{second}")))  # no journal holds it
                await trio.sleep(1)
            actor.close()
    lines = store_log.named("store write failed")
    times = [round(at - began) for at, _, _ in lines]
    assert len(times) == 4 and times[0] == 0 and times[-1] == 25, times  # the rest when it stops
    assert all(later - earlier >= 10 for earlier, later in itertools.pairwise(times[:-1])), times
    assert sum(fields["not_saved"] for _, fields, _ in lines) == 50
    assert sum(fields["lost"] for _, fields, _ in lines) == 25
    assert lines[0][1]["kinds"] == "pins 1, audit rows 1"
    assert all(fields["error"] == "database or disk is full" for _, fields, _ in lines)
    assert all(record.exc_info is None for _, _, record in lines)


async def test_a_write_that_fails_for_a_bug_is_said_with_its_traceback(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path, store_log: Stamped
) -> None:
    with Store.open(tmp_path / "db.sqlite") as store:
        actor = StoreActor(store)
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            actor.submit(SaveToolList("fs", [{"name": object()}], 1.0))  # not JSON
            actor.close()
    ((_, fields, record),) = store_log.named("store write failed")
    assert fields["kinds"] == "tool lists 1" and "lost" not in fields
    assert record.exc_info is not None


async def test_a_call_waiting_for_its_approval_is_on_disk_as_interrupted_until_it_ends(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    answer = trio.Event()

    async def approver(request: ApprovalRequest) -> Approval:
        await answer.wait()
        return Approval("allow")

    async with running(tmp_path, approver) as run, trio.open_nursery() as nursery:
        nursery.start_soon(run.turn.call, "fake_note", {"text": "later"})
        await trio.testing.wait_all_tasks_blocked()
        lines, _ = read_journal(segments(tmp_path))
        (waiting,) = [r for r in lines.values() if r.tool == "fake_note"]
        assert (waiting.decision, waiting.outcome) == ("ask", "interrupted")
        answer.set()
        rows = await rows_at_least(run, 1)
        assert [(r.record, r.decision, r.outcome) for r in rows] == [(waiting.record, "ask", "ok")]


async def test_a_call_whose_caller_is_cancelled_leaves_a_cancelled_row(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with running(tmp_path) as run:

        async def never(session: Any, request: Any) -> None:
            await trio.sleep_forever()

        run.server.call_handler = never
        with trio.move_on_after(5):
            await run.turn.call("fake_echo", {"n": 1})
        (cancelled,) = await rows_at_least(run, 1)
        assert (cancelled.decision, cancelled.outcome, cancelled.duration_ms) == ("allow", "cancelled", 5000)


# ------------------------------------------------------------------ replay


def test_a_fold_is_idempotent_and_the_last_line_of_a_call_wins(tmp_path: Path) -> None:
    path = tmp_path / "j.1.jsonl"
    lines = [
        journal_module.encode(row("i.1", "interrupted")),
        journal_module.encode(row("i.2", "interrupted", n=2)),
        journal_module.encode(row("i.1", "ok")),
        journal_module.encode(row("i.3", "denied", n=3)),
        b'{"record": "i.4", "at": 1',  # the torn last line of a killed writer
    ]
    path.write_bytes(b"".join(lines))
    with Store.open(tmp_path / "db" / "supervisor.db") as store:
        assert fold_journal(store, [path], interrupted=False) == 2
        assert fold_journal(store, [path], interrupted=True) == 3
        assert fold_journal(store, [path], interrupted=True) == 3
        got = {(r.record, r.outcome) for r in store.audit_rows()}
    assert got == {("i.1", "ok"), ("i.2", "interrupted"), ("i.3", "denied")}


def test_a_traced_rows_trace_id_is_journaled_and_a_line_from_before_folds_without_one(
    tmp_path: Path,
) -> None:
    traced = attrs.evolve(row("i.1"), trace_id="4bf92f3577b34da6a3ce929d0e0e4736")
    untraced = journal_module.encode(row("i.2", n=2))
    assert b"trace_id" not in untraced  # an untraced line is as it was before
    path = tmp_path / "j.1.jsonl"
    path.write_bytes(journal_module.encode(traced) + untraced)
    rows, _ = read_journal([path])
    assert rows == {"i.1": traced, "i.2": row("i.2", n=2)}
    with Store.open(tmp_path / "db" / "supervisor.db") as store:
        fold_journal(store, [path], interrupted=False)
        got = {r.record: r.trace_id for r in store.audit_rows()}
    assert got == {"i.1": "4bf92f3577b34da6a3ce929d0e0e4736", "i.2": None}


@pytest.mark.parametrize(("field", "value"), [("person", "ada"), ("replica", "r1")])
def test_a_rows_person_or_replica_is_journaled_and_a_line_from_before_folds_without_one(
    tmp_path: Path, field: str, value: str
) -> None:
    ada = attrs.evolve(row("i.1"), trace_id="4bf92f3577b34da6a3ce929d0e0e4736", **{field: value})
    before = journal_module.encode(row("i.2", n=2))
    assert field.encode() not in before  # a row without one is written as before
    path = tmp_path / "j.1.jsonl"
    path.write_bytes(journal_module.encode(ada) + before)
    rows, _ = read_journal([path])
    assert rows == {"i.1": ada, "i.2": row("i.2", n=2)}
    with Store.open(tmp_path / "db" / "supervisor.db") as store:
        fold_journal(store, [path], interrupted=False)
        got = {r.record: getattr(r, field) for r in store.audit_rows()}
    assert got == {"i.1": value, "i.2": None}


def test_start_folds_journals_of_dead_instances_only(tmp_path: Path) -> None:
    state = tmp_path
    directory = journal_dir(state)
    directory.mkdir()
    live = InstanceLock.acquire(state, "test")
    dead = InstanceLock.acquire(state, "test")
    os.close(dead._fd)  # dies without releasing: its lock file stays, unlocked
    gone = "777-aaaaaaaaaaaa"  # ended without folding: no lock file at all
    for instance, n in ((live.id, 1), (dead.id, 2), (gone, 3)):
        (directory / f"{instance}.1.jsonl").write_bytes(
            journal_module.encode(row(f"{instance}.1", "interrupted", n=n))
        )
    with Store.open(state / "supervisor.db") as store, claim_dead_instances(state) as claimed:
        assert [d.id for d in claimed] == [dead.id]
        recovered = recover_audit_journals(store, state, claimed)
        assert recovered == claimed
        for instance in recovered:
            instance.done()
        assert {r.args_bytes for r in store.audit_rows()} == {2, 3}
    assert [p.name for p in directory.iterdir()] == [f"{live.id}.1.jsonl"]
    assert not (instances_dir(state) / f"{dead.id}.lock").exists()
    live.release()


# ------------------------------------------------------------------ a real full disk


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs of our own (root, or a user namespace, may mount one)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CAP_SYS_ADMIN)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(path: Path) -> None:
    """Take every free byte of the file system ``path`` is on."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        for size in (1 << 16, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)


async def test_on_a_full_tmpfs_calls_are_answered_and_rows_catch_up_when_space_returns(
    small_tmpfs: Path,
) -> None:
    state = small_tmpfs / "state"
    async with running(state) as run:
        assert (await run.turn.call("fake_echo", {"n": -1})).ok
        await run.rows()
        filler = small_tmpfs / "filler"
        await trio.to_thread.run_sync(_fill, filler)
        answered = []
        with trio.fail_after(30):
            for n in range(40):
                envelope = await run.turn.call("fake_echo", {"n": n})
                assert envelope.ok, envelope
                answered.append(n)
            assert (await _health(run))["status"] == "degraded"
            counts = await _metrics(run)
            assert counts["mcp_supervisor_audit_rows_pending"] > 0
            assert counts["mcp_supervisor_audit_rows_dropped_total"] == 0
            filler.unlink()
            space_back = time.monotonic()
            await until(lambda: not run.sup.journal.degraded, 30)
        assert time.monotonic() - space_back < 5, "writing resumes within seconds"
        await rows_at_least(run, 41, 30)
    with Store.open(state / "supervisor.db") as store:
        rows = store.audit_rows(limit=1000)
    assert len(rows) == 41 and all(r.outcome == "ok" for r in rows)
    assert len({r.record for r in rows}) == 41
