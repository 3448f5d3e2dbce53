"""The store: file safety, migrations, each table's round trip, and the StoreActor.

Tests that take ``store`` or ``reopen`` are the store's contract and run on SQLite and
PostgreSQL (``conftest.py``); ``test_sqlite_*`` are about the SQLite file alone.

Actor tests run on the real clock (no ``autojump_clock``): the actor writes in worker
threads, and a virtual clock would jump ahead while a thread works and fire deadlines.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sqlite3
import stat
import threading
import time
import types
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.tool_definitions import DefinitionParts
from supervisor.store import (
    SCHEMA_VERSION,
    AddAudit,
    AuditRow,
    ForgetApproval,
    RememberApproval,
    SaveToolList,
    SetPin,
    Store,
    StoreActor,
    StoreError,
    StoreMessage,
    StoreVersionError,
    hash_arguments,
)
from supervisor.store.actor import LINGER_BATCH
from supervisor.store.schema import LEGACY_FENCE, migrate


def _row(n: int = 0, *, at: float | None = None, tenant: str = "t1", session: str = "s1") -> AuditRow:
    return AuditRow(
        at=1_700_000_000.0 + n if at is None else at,
        tenant=tenant,
        session=session,
        tool=f"time_tool_{n}",
        server="time",
        decision="allow",
        outcome="ok",
        duration_ms=n,
        args_sha256="ab" * 32,
        args_bytes=2,
        result_bytes=10 * n,
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "supervisor.db"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def _version(raw: sqlite3.Connection) -> int:
    """The schema version in the file's ``schema_version`` table."""
    return int(raw.execute("SELECT version FROM schema_version").fetchone()[0])


# ------------------------------------------------------------------ files and pragmas


def test_sqlite_open_creates_a_private_directory_and_files(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "state" / "supervisor.db"
    with Store.open(path) as store:
        store.add_audit([_row()])  # makes SQLite create the -wal and -shm files
        assert _mode(path.parent) == 0o700
        for name in ("supervisor.db", "supervisor.db-wal", "supervisor.db-shm"):
            assert _mode(path.parent / name) == 0o600, name


def test_sqlite_open_tightens_an_existing_loose_file(db_path: Path) -> None:
    db_path.parent.mkdir()
    db_path.touch(mode=0o644)
    db_path.chmod(0o644)
    Store.open(db_path).close()
    assert _mode(db_path) == 0o600


def test_sqlite_wal_and_connection_pragmas(db_path: Path) -> None:
    store = Store.open(db_path)
    with contextlib.closing(store), contextlib.closing(_raw(db_path)) as other:
        assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)  # stored in the file
        own = store._connection  # per-connection settings can only be read on ours
        assert own.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        assert own.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert own.execute("PRAGMA busy_timeout").fetchone() == (5000,)


def test_sqlite_a_file_that_is_not_a_database_is_refused_by_name(db_path: Path) -> None:
    db_path.parent.mkdir()
    db_path.write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(StoreError, match=str(db_path)):
        Store.open(db_path)


def test_use_after_close_raises_store_error(reopen: Callable[[], Store]) -> None:
    with reopen() as store:
        pass
    with pytest.raises(StoreError, match="closed"):
        store.add_audit([_row()])
    with pytest.raises(StoreError, match="closed"):
        store.pins()


# ------------------------------------------------------------------ migrations


def _tables(path: Path) -> set[str]:
    with contextlib.closing(_raw(path)) as raw:
        rows = raw.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')").fetchall()
    return {name for (name,) in rows if not name.startswith("sqlite_")}


def test_sqlite_migrates_an_empty_file_to_the_latest_version(db_path: Path) -> None:
    db_path.parent.mkdir()
    db_path.touch()
    Store.open(db_path).close()
    with contextlib.closing(_raw(db_path)) as raw:
        assert _version(raw) == SCHEMA_VERSION
        assert raw.execute("PRAGMA user_version").fetchone() == (LEGACY_FENCE,)
    assert {"audit", "approvals", "pins", "tool_lists", "audit_by_tenant"} <= _tables(db_path)


# Version 1 as released, written out by hand: the upgrade must work on files in the field.
_V1 = """
CREATE TABLE audit (id INTEGER PRIMARY KEY, at REAL NOT NULL, tenant TEXT NOT NULL,
    session TEXT NOT NULL, tool TEXT NOT NULL, server TEXT NOT NULL,
    decision TEXT NOT NULL CHECK (decision IN ('allow', 'ask', 'deny')), outcome TEXT NOT NULL,
    duration_ms INTEGER NOT NULL, args_sha256 TEXT NOT NULL, args_bytes INTEGER NOT NULL,
    result_bytes INTEGER NOT NULL);
CREATE TABLE approvals (tenant TEXT NOT NULL, permission TEXT NOT NULL, fingerprint TEXT NOT NULL,
    decision TEXT NOT NULL CHECK (decision IN ('allow', 'deny')), PRIMARY KEY (tenant, permission));
CREATE TABLE pins (server TEXT NOT NULL, tool TEXT NOT NULL, fingerprint TEXT NOT NULL,
    PRIMARY KEY (server, tool));
CREATE TABLE tool_lists (server TEXT PRIMARY KEY, tools TEXT NOT NULL, listed_at REAL NOT NULL);
INSERT INTO audit VALUES (1, 1700000000.5, 't1', 's1', 'time_now', 'time', 'ask', 'denied', 7, 'ff', 3, 0);
INSERT INTO approvals VALUES ('t1', 'mcp:time:now', 'fp1', 'allow');
INSERT INTO pins VALUES ('time', 'now', 'fp1');
INSERT INTO tool_lists VALUES ('time', '[{"name":"now"}]', 1700000000.0);
PRAGMA user_version = 1;
"""


def test_sqlite_migrates_an_old_version_keeping_its_data(db_path: Path) -> None:
    assert SCHEMA_VERSION == 14, "a step was added: check it is applied to an old file here too"
    db_path.parent.mkdir()
    with contextlib.closing(_raw(db_path)) as raw:
        raw.executescript(_V1)
    assert "audit_by_tenant" not in _tables(db_path)

    with Store.open(db_path) as store:
        assert store.audit_rows() == [
            AuditRow(1700000000.5, "t1", "s1", "time_now", "time", "ask", "denied", 7, "ff", 3, 0)
        ]
        assert store.approvals() == {("t1", "mcp:time:now"): ("fp1", "allow")}
        assert store.pins() == {("time", "now"): "fp1"}
        assert store.tool_lists() == {"time": ([{"name": "now"}], 1700000000.0)}
        store.add_audit([_row()])
        assert len(store.audit_rows()) == 2
        # 4: rows carry their journal record's id, and one id is one row.
        journaled = attrs.evolve(_row(5), record="i-1.1")
        store.add_audit([journaled, _row(6)])
        store.add_audit([journaled])
        assert [row.record for row in store.audit_rows()].count("i-1.1") == 1
        assert len(store.audit_rows()) == 4
        # 5: the protocol era each server speaks; none is remembered after the upgrade.
        assert store.eras() == {}
        store.save_era("time", "2025-11-25", 1700000001.0)
        assert store.eras() == {"time": "2025-11-25"}
        # 6: the rest of a listing beside its tools; a list from before has none.
        assert store.surfaces() == {}
        store.save_tool_list("time", [{"name": "now"}], 1700000002.0, {"prompts": [{"name": "p"}]})
        assert store.surfaces() == {"time": {"prompts": [{"name": "p"}]}}
        # 7: a pin keeps its parts' hashes; the old pin has none, and keeps its fingerprint.
        assert store.pin_parts() == {}
        parts = DefinitionParts("d" * 64, "s" * 64)
        store.set_pin("fs", "write", "fp2", parts)
        assert store.pins() == {("time", "now"): "fp1", ("fs", "write"): "fp2"}
        assert store.pin_parts() == {("fs", "write"): parts}
        # 8: a traced call's row keeps its trace id; the rows from before have none.
        assert {row.trace_id for row in store.audit_rows()} == {None}
        store.add_audit([attrs.evolve(_row(7), trace_id="0af7651916cd43dd8448eb211c80319c")])
        assert store.audit_rows()[0].trace_id == "0af7651916cd43dd8448eb211c80319c"
        # 9 (the audit's person): the rows from before have none; a purge by person
        # leaves them.
        assert {row.person for row in store.audit_rows()} == {None}
        store.add_audit([attrs.evolve(_row(8), person="ada")])
        assert store.audit_rows()[0].person == "ada"
        assert store.purge_audit(person="ada") == 1 and len(store.audit_rows()) == 5
        # 10: OAuth records per person beside the shared one (person "").
        store.save_oauth("docs", "https://d.example/mcp", {"t": "shared"}, 1.0)
        store.save_oauth("docs", "https://d.example/mcp", {"t": "ada's"}, 1.0, person="ada")
        assert store.oauth_record("docs", "https://d.example/mcp") == {"t": "shared"}
        assert store.oauth_record("docs", "https://d.example/mcp", person="ada") == {"t": "ada's"}
        # 11: a refresh lease per record.
        assert store.take_oauth_lease("docs", "https://d.example/mcp", "p1", 30) == (True, None)
        # 12: the replica that answered a call; the rows from before (and a single
        # process's) name none.
        assert {row.replica for row in store.audit_rows()} == {None}
        store.add_audit([attrs.evolve(_row(9), replica="r1")])
        assert store.audit_rows()[0].replica == "r1"
        assert store.audit_between(0, float("inf"))[-1].replica == "r1"
        # 13: new-era tenant states shared by replicas, empty after the upgrade.
        assert store.tenant_state("t1", None).activated == ()
        assert store.add_tenant_state("t1", None, [("time_now", 0)], []) == 1
        assert store.tenant_state("t1", None).activated == ("time_now",)
        # 14: who cancelled a call by its id; the rows from before name nobody.
        assert {row.cancelled_by for row in store.audit_rows()} == {None}
        store.add_audit([attrs.evolve(_row(10), cancelled_by="operator default")])
        assert store.audit_rows()[0].cancelled_by == "operator default"
    with contextlib.closing(_raw(db_path)) as raw:
        assert _version(raw) == 14
        # the version moved from the header into the table: older supervisors refuse the file
        assert raw.execute("PRAGMA user_version").fetchone() == (LEGACY_FENCE,)
    assert {
        "audit_by_time",
        "audit_by_tenant",
        "audit_by_session",
        "oauth",
        "audit_by_record",
        "eras",
        # 12: replicas' heartbeats and the sessions they hold
        "replicas",
        "gateway_sessions",
        "gateway_sessions_by_owner",
        # 13: new-era tenant states shared by replicas
        "tenant_activations",
        "tenant_approvals",
        "tenant_uses",
        # 14: the audit search by server
        "audit_by_server",
    } <= _tables(db_path)


# Version 4 as released (the version before the eras table), by hand as above.
_V4 = (
    _V1.replace("PRAGMA user_version = 1;", "")
    + """
CREATE INDEX audit_by_time ON audit (at);
CREATE TABLE oauth (server TEXT NOT NULL, url TEXT NOT NULL, record TEXT NOT NULL,
    updated_at REAL NOT NULL, PRIMARY KEY (server, url));
ALTER TABLE audit ADD COLUMN record TEXT;
PRAGMA user_version = 4;
"""
)


def test_sqlite_a_version_4_file_gains_the_eras_and_keeps_its_tool_lists(db_path: Path) -> None:
    db_path.parent.mkdir()
    with contextlib.closing(_raw(db_path)) as raw:
        raw.executescript(_V4)
    with Store.open(db_path) as store:
        assert store.tool_lists() == {"time": ([{"name": "now"}], 1700000000.0)}
        store.save_era("time", "2026-07-28", 1.0)
        store.save_era("other", "2025-11-25", 2.0)
        store.save_era("time", "2025-11-25", 3.0)  # found again: replaced
        store.save_era("other", None, 4.0)  # forgotten
        store.save_era("gone", None, 5.0)  # forgetting an unknown server is fine
    with Store.open(db_path) as store:  # and it lasts
        assert store.eras() == {"time": "2025-11-25"}


def test_sqlite_refuses_a_newer_version_and_leaves_the_file_alone(db_path: Path) -> None:
    db_path.parent.mkdir()
    with contextlib.closing(_raw(db_path)) as raw:
        raw.execute("CREATE TABLE future (x)")
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreVersionError) as caught:
        Store.open(db_path)
    message = str(caught.value)
    assert str(db_path) in message
    assert f"version {SCHEMA_VERSION + 1}" in message and f"up to {SCHEMA_VERSION}" in message
    with contextlib.closing(_raw(db_path)) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION + 1,)
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert _tables(db_path) == {"future"}


def test_sqlite_a_failing_step_rolls_back_to_the_previous_version(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    steps = [("CREATE TABLE a (x)",), ("CREATE TABLE b (x)", "INSERT INTO no_such_table VALUES (1)")]
    with contextlib.closing(_raw(path)) as raw:
        with pytest.raises(sqlite3.OperationalError):
            migrate(raw, path, steps)
        assert _version(raw) == 1
        assert not raw.in_transaction
    assert _tables(path) == {"a", "schema_version"}  # step 2 is all or nothing


def test_sqlite_a_newer_version_in_the_table_is_refused_too(db_path: Path) -> None:
    Store.open(db_path).close()
    with contextlib.closing(_raw(db_path)) as raw:
        raw.execute(f"UPDATE schema_version SET version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreVersionError, match=f"version {SCHEMA_VERSION + 1}"):
        Store.open(db_path)


def test_sqlite_a_fully_migrated_file_from_before_the_table_moves_its_version(db_path: Path) -> None:
    Store.open(db_path).close()
    with contextlib.closing(_raw(db_path)) as raw:  # as the supervisor before the table left it
        raw.execute("DROP TABLE schema_version")
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    with Store.open(db_path) as store:
        store.add_audit([_row()])
    with contextlib.closing(_raw(db_path)) as raw:
        assert _version(raw) == SCHEMA_VERSION
        assert raw.execute("PRAGMA user_version").fetchone() == (LEGACY_FENCE,)


def test_sqlite_the_fence_read_after_another_process_made_the_table_is_not_a_newer_version(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes opening a fresh file at once: one looked for the version table
    before the other committed it (and the fence with it), then read the fence. Outside
    a transaction each read is its own snapshot; the fence must send it to the table."""
    from supervisor.store import schema

    Store.open(db_path).close()  # "the other process": the table and the fence committed
    monkeypatch.setattr(schema, "_has_version_table", lambda connection, dialect: False)  # the stale look
    with contextlib.closing(_raw(db_path)) as raw:
        assert schema.schema_version(raw) == SCHEMA_VERSION  # not StoreVersionError's 1000000


# ------------------------------------------------------------------ audit


def test_audit_round_trip_and_reopen(reopen: Callable[[], Store]) -> None:
    rows = [_row(n) for n in range(3)]
    rows[1] = attrs.evolve(rows[1], trace_id="4bf92f3577b34da6a3ce929d0e0e4736")
    with reopen() as store:
        store.add_audit(rows)
    with reopen() as store:
        assert store.audit_rows() == rows[::-1]


def test_audit_newest_first_ties_by_insertion_filters_and_limit(store: Store) -> None:
    a = _row(1, at=10.0, tenant="t1", session="s1")
    b = _row(2, at=30.0, tenant="t2", session="s2")
    c = _row(3, at=20.0, tenant="t1", session="s2")
    d = _row(4, at=20.0, tenant="t1", session="s1")  # same time as c, inserted later
    store.add_audit([a, b])
    store.add_audit([c, d])
    assert store.audit_rows() == [b, d, c, a]
    assert store.audit_rows(limit=2) == [b, d]
    assert store.audit_rows(limit=0) == []
    assert store.audit_rows(tenant="t1") == [d, c, a]
    assert store.audit_rows(session="s2") == [b, c]
    assert store.audit_rows(tenant="t1", session="s2") == [c]
    assert store.audit_rows(tenant="nobody") == []
    with pytest.raises(ValueError):
        store.audit_rows(limit=-1)


def test_add_audit_is_all_or_nothing(store: Store) -> None:
    bad = AuditRow(1.0, "t", "s", "x", "y", "maybe", "ok", 0, "", 0, 0)  # violates the CHECK
    with pytest.raises(StoreError):
        store.add_audit([_row(1), bad, _row(2)])
    assert store.audit_rows() == []


# ------------------------------------------------------------------ approvals, pins, tool lists


def test_approvals_upsert_forget_and_survive_reopen(reopen: Callable[[], Store]) -> None:
    with reopen() as store:
        store.remember_approval("t1", "mcp:fs:write", "fp1", "allow")
        store.remember_approval("t2", "mcp:fs:write", "fp1", "deny")
        store.remember_approval("t1", "mcp:fs:write", "fp2", "deny")  # replaces t1's answer
        store.remember_approval("t1", "mcp:fs:read", "fp3", "allow")
        store.forget_approval("t1", "mcp:fs:read")
        store.forget_approval("t9", "never:remembered")
        with pytest.raises(ValueError):
            store.remember_approval("t1", "mcp:fs:x", "fp", "ask")
    with reopen() as store:
        assert store.approvals() == {
            ("t1", "mcp:fs:write"): ("fp2", "deny"),
            ("t2", "mcp:fs:write"): ("fp1", "deny"),
        }


def test_pins_upsert(store: Store) -> None:
    store.set_pin("github", "create_issue", "h1", DefinitionParts("d1", "s1"))
    store.set_pin("time", "now", "h2", DefinitionParts("d2", "s2"))
    store.set_pin("github", "create_issue", "h3", DefinitionParts("d3", "s1"))
    assert store.pins() == {("github", "create_issue"): "h3", ("time", "now"): "h2"}
    assert store.pin_parts() == {
        ("github", "create_issue"): DefinitionParts("d3", "s1"),
        ("time", "now"): DefinitionParts("d2", "s2"),
    }
    store.set_pin("time", "now", "h4")  # without its parts: none are kept for it
    assert store.pin_parts() == {("github", "create_issue"): DefinitionParts("d3", "s1")}


def test_tool_lists_replace_and_round_trip_json(store: Store) -> None:
    tools: list[dict[str, Any]] = [
        {"name": "now", "description": "heure — 時間", "inputSchema": {"type": "object", "properties": {}}},
        {"name": "tz", "annotations": {"readOnlyHint": True}, "n": 1.5, "none": None},
    ]
    store.save_tool_list("time", tools, 100.0)
    store.save_tool_list("fs", [types.MappingProxyType({"name": "read"})], 50.0)  # any Mapping
    assert store.tool_lists() == {"time": (tools, 100.0), "fs": ([{"name": "read"}], 50.0)}
    store.save_tool_list("time", [], 200.0)
    assert store.tool_lists()["time"] == ([], 200.0)


def test_the_rest_of_a_listing_is_kept_beside_its_tools_and_replaced_with_them(store: Store) -> None:
    surface = {
        "resources": [{"uri": "file:///n.md", "name": "n", "_meta": {"x": [1, 1.5, None]}}],
        "templates": [],
        "prompts": [{"name": "review", "arguments": [{"name": "file", "required": True}]}],
        "features": {"resources": True, "prompts": True},
    }
    store.save_tool_list("docs", [{"name": "find"}], 1.0, types.MappingProxyType(surface))
    store.save_tool_list("time", [{"name": "now"}], 1.0)  # its surface not known
    assert store.surfaces() == {"docs": surface}
    store.save_tool_list("docs", [{"name": "find"}], 2.0)  # listed again without: forgotten
    assert store.surfaces() == {}
    assert store.tool_lists()["docs"] == ([{"name": "find"}], 2.0)


def test_a_transaction_commits_together_and_rolls_back_together(store: Store) -> None:
    with store.transaction():
        store.set_pin("a", "x", "1")
        store.add_audit([_row()])
    with pytest.raises(RuntimeError), store.transaction():
        store.set_pin("b", "y", "2")
        store.add_audit([_row(1)])
        raise RuntimeError("boom")
    assert store.pins() == {("a", "x"): "1"}
    assert len(store.audit_rows()) == 1


def test_a_failed_nested_write_does_not_spoil_the_outer_transaction(store: Store) -> None:
    with store.transaction():
        store.set_pin("a", "x", "1")
        with pytest.raises(StoreError):
            store.add_audit([_row(1), AuditRow(1.0, "t", "s", "x", "y", "maybe", "ok", 0, "", 0, 0)])
        store.set_pin("b", "y", "2")
    assert store.pins() == {("a", "x"): "1", ("b", "y"): "2"}
    assert store.audit_rows() == []


# ------------------------------------------------------------------ hash_arguments


def test_hash_arguments_is_canonical_compact_sorted_json() -> None:
    digest, size = hash_arguments({"b": [1, {"z": None, "y": "é"}], "a": True})
    canonical = '{"a":true,"b":[1,{"y":"é","z":null}]}'.encode()
    assert (digest, size) == (hashlib.sha256(canonical).hexdigest(), len(canonical))
    assert size == 38  # "é" counts as its two UTF-8 bytes


def test_hash_arguments_ignores_key_order_but_not_values() -> None:
    one = hash_arguments({"path": "/tmp/x", "opts": {"a": 1, "b": 2}})
    two = hash_arguments(types.MappingProxyType({"opts": {"b": 2, "a": 1}, "path": "/tmp/x"}))
    assert one == two
    assert hash_arguments({"path": "/tmp/y", "opts": {"a": 1, "b": 2}})[0] != one[0]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(v) for v in value]
    return value


@settings(max_examples=50)
@given(st.dictionaries(st.text(max_size=8), _json, max_size=6))
def test_hash_arguments_is_stable_under_any_key_order(arguments: dict[str, Any]) -> None:
    assert hash_arguments(_reversed_keys(arguments)) == hash_arguments(arguments)


# ------------------------------------------------------------------ StoreActor


class CountingStore(Store):
    """Counts committed outermost transactions: the batching claim, measured at the source."""

    commits = 0

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        outermost = self._depth == 0
        with super().transaction():
            yield
        if outermost:
            self.commits += 1


@contextlib.asynccontextmanager
async def running(actor: StoreActor) -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        yield nursery
        nursery.cancel_scope.cancel()


async def test_actor_batches_everything_queued_into_one_transaction(db_path: Path) -> None:
    with CountingStore.open(db_path) as store:
        actor = StoreActor(store)
        async with running(actor):
            assert all(actor.submit(AddAudit(_row(n))) for n in range(100))  # no checkpoint between
            with trio.fail_after(5):
                await actor.flush()
            assert store.commits == 1
            assert len(store.audit_rows(limit=1000)) == 100
            stats = actor.statistics()
            assert (stats.written, stats.batches, stats.dropped, stats.failures, stats.queued) == (
                100, 1, 0, 0, 0,
            )  # fmt: skip


async def _until_written(actor: StoreActor, count: int) -> None:
    while actor.statistics().written < count:
        await actor._progress.wait()


async def test_messages_submitted_one_by_one_share_a_transaction(
    db_path: Path, thread_safe_clock: trio.testing.MockClock
) -> None:
    # Sequential calls audit one row each, a checkpoint apart; the linger gathers them.
    with CountingStore.open(db_path) as store:
        actor = StoreActor(store, linger_s=0.5)
        async with running(actor):
            for n in range(20):
                assert actor.submit(AddAudit(_row(n)))
                await trio.lowlevel.checkpoint()
            with trio.fail_after(5):
                await _until_written(actor, 20)
            assert store.commits == 1
            assert actor.statistics().batches == 1


async def test_flush_and_close_cut_the_linger_short(
    store: Store, thread_safe_clock: trio.testing.MockClock
) -> None:
    actor = StoreActor(store, linger_s=3600)
    async with running(actor):
        actor.submit(AddAudit(_row(1)))
        await trio.sleep(0.01)  # the actor took the row and lingers
        with trio.fail_after(5):
            await actor.flush()
        assert actor.statistics().written == 1
        actor.submit(AddAudit(_row(2)))
        await trio.sleep(0.01)
        actor.close()
        with trio.fail_after(5):
            await _until_written(actor, 2)


async def test_a_full_batch_ends_the_linger(store: Store, thread_safe_clock: trio.testing.MockClock) -> None:
    actor = StoreActor(store, linger_s=3600)
    async with running(actor):
        for n in range(LINGER_BATCH):
            assert actor.submit(AddAudit(_row(n)))
            await trio.lowlevel.checkpoint()
        with trio.fail_after(5):
            await _until_written(actor, LINGER_BATCH)


async def test_actor_writes_every_message_kind_in_order(store: Store) -> None:
    actor = StoreActor(store)
    async with running(actor):
        messages: list[StoreMessage] = [
            RememberApproval("t1", "mcp:fs:write", "fp1", "allow"),
            RememberApproval("t1", "mcp:fs:read", "fp1", "allow"),
            ForgetApproval("t1", "mcp:fs:read"),
            RememberApproval("t1", "mcp:fs:write", "fp2", "deny"),  # same key: the last one wins
            SetPin("fs", "write", "h1", DefinitionParts("d", "s")),
            SaveToolList("fs", [{"name": "old"}], 1.0),
            SaveToolList("fs", [{"name": "new"}], 2.0),
            AddAudit(_row(1)),
        ]
        for message in messages:
            assert actor.submit(message)
        with trio.fail_after(5):
            await actor.flush()
    assert store.approvals() == {("t1", "mcp:fs:write"): ("fp2", "deny")}
    assert store.pins() == {("fs", "write"): "h1"}
    assert store.pin_parts() == {("fs", "write"): DefinitionParts("d", "s")}
    assert store.tool_lists() == {"fs": ([{"name": "new"}], 2.0)}
    assert store.audit_rows() == [_row(1)]
    assert actor.statistics().written == len(messages)


async def test_flush_waits_for_the_write_and_read_sees_it(store: Store) -> None:
    actor = StoreActor(store)
    async with running(actor):
        for round_ in range(3):
            actor.submit(AddAudit(_row(round_)))
            with trio.fail_after(5):
                await actor.flush()
                assert len(await actor.read(lambda s: s.audit_rows())) == round_ + 1


async def test_a_full_mailbox_drops_and_counts_without_blocking(store: Store) -> None:
    actor = StoreActor(store, capacity=2)  # not running: nothing drains the mailbox
    assert [actor.submit(AddAudit(_row(n))) for n in range(4)] == [True, True, False, False]
    stats = actor.statistics()
    assert (stats.dropped, stats.queued) == (2, 2)


async def test_closing_the_mailbox_writes_the_queue_then_refuses(store: Store) -> None:
    actor = StoreActor(store)
    for n in range(10):
        actor.submit(AddAudit(_row(n)))
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(actor.run)
            await actor.aclose()
    assert len(store.audit_rows()) == 10
    assert actor.submit(AddAudit(_row(99))) is False
    assert actor.statistics().dropped == 1


async def test_cancellation_writes_what_is_queued(store: Store) -> None:
    actor = StoreActor(store)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run)
            for n in range(50):
                actor.submit(AddAudit(_row(n)))
            nursery.cancel_scope.cancel()  # before the actor has run again
    assert len(store.audit_rows(limit=100)) == 50
    assert actor.statistics().written == 50
    assert actor.submit(AddAudit(_row(99))) is False  # its mailbox is closed now


async def test_a_closed_connection_is_logged_and_counted_not_raised(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    actor = StoreActor(store)
    caplog.set_level(logging.ERROR, logger="supervisor.store")
    async with running(actor):
        store.close()
        for n in range(3):
            actor.submit(AddAudit(_row(n)))
        with trio.fail_after(5):
            await actor.flush()
        stats = actor.statistics()
        assert (stats.written, stats.failures) == (0, 3)
        assert any(r.name == "supervisor.store" and r.levelno == logging.ERROR for r in caplog.records)
        actor.submit(AddAudit(_row(9)))  # still serving
        with trio.fail_after(5):
            await actor.flush()
        assert actor.statistics().failures == 4


async def test_one_bad_message_does_not_sink_its_batch(store: Store) -> None:
    actor = StoreActor(store)
    async with running(actor):
        actor.submit(AddAudit(_row(1)))
        actor.submit(SaveToolList("fs", [{"name": object()}], 1.0))  # not JSON
        actor.submit(AddAudit(_row(2)))
        actor.submit(SetPin("fs", "read", "h"))
        with trio.fail_after(5):
            await actor.flush()
    assert store.audit_rows() == [_row(2), _row(1)]
    assert store.pins() == {("fs", "read"): "h"}
    assert store.tool_lists() == {}
    stats = actor.statistics()
    assert (stats.written, stats.failures) == (3, 1)


async def test_sqlite_a_locked_database_fails_in_a_thread_while_the_loop_runs(db_path: Path) -> None:
    with Store.open(db_path, busy_timeout_ms=300) as store:
        actor = StoreActor(store)
        async with running(actor):
            with contextlib.closing(_raw(db_path)) as other:
                other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
                for n in range(3):
                    actor.submit(AddAudit(_row(n)))
                ticks = 0
                start = time.monotonic()
                with trio.fail_after(5):
                    async with trio.open_nursery() as nursery:

                        async def flush_then_stop() -> None:
                            await actor.flush()
                            nursery.cancel_scope.cancel()

                        nursery.start_soon(flush_then_stop)
                        while True:
                            await trio.sleep(0.01)
                            ticks += 1
                elapsed = time.monotonic() - start
                other.execute("ROLLBACK")
            assert ticks >= 10  # the loop kept running during the ~300 ms busy wait
            # One busy wait, not four: a locked database is not retried message by message.
            assert elapsed < 0.9
            stats = actor.statistics()
            assert (stats.written, stats.failures) == (0, 3)
            actor.submit(AddAudit(_row(3)))  # the lock is gone: writes work again
            with trio.fail_after(5):
                await actor.flush()
            assert store.audit_rows() == [_row(3)]


class SlowStore(Store):
    """A disk that takes ``delay`` per transaction, holding the lock meanwhile."""

    delay = 0.0
    release = threading.Event()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with super().transaction():
            if self._depth == 1:
                self.release.wait(self.delay)
            yield


async def test_shutdown_gives_up_at_its_deadline_and_the_late_write_rolls_back(db_path: Path) -> None:
    with SlowStore.open(db_path) as store:
        store.release = threading.Event()
        actor = StoreActor(store, shutdown_timeout_s=0.2)
        start = time.monotonic()
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                await nursery.start(actor.run)
                store.delay = 10.0
                actor.submit(AddAudit(_row(1)))
                nursery.cancel_scope.cancel()
        assert time.monotonic() - start < 2.0  # not the 10 s the write would take
        assert actor.statistics().failures == 1
        with trio.fail_after(5):
            await actor.flush()  # everything is settled: nothing hangs
        # The abandoned thread wakes and must not commit what was reported lost; closing
        # the store waits for it (the store lock).
        store.release.set()
    with Store.open(db_path) as reopened:
        assert reopened.audit_rows() == []


async def test_put_waits_for_room_instead_of_dropping_a_row(store: Store) -> None:
    actor = StoreActor(store, capacity=2)
    for n in range(2):
        assert await actor.put(AddAudit(_row(n)))  # room: no wait
    waited: list[bool] = []

    async def third(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            task_status.started()
            scope.cancel()  # even a caller being cancelled keeps its row
            waited.append(await actor.put(AddAudit(_row(2))))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(third)
            assert waited == []  # the mailbox is full: it waits
            await nursery.start(actor.run)
            await actor.flush()
            await actor.aclose()
    assert waited == [True]
    assert len(store.audit_rows(limit=10)) == 3
    assert actor.statistics().dropped == 0


async def test_put_counts_a_row_dropped_only_after_waiting_its_bound(
    store: Store, autojump_clock: trio.testing.MockClock
) -> None:
    actor = StoreActor(store, capacity=1)
    assert await actor.put(AddAudit(_row(0)))
    started = trio.current_time()
    assert await actor.put(AddAudit(_row(1)), wait_s=5.0) is False  # nobody writes
    assert trio.current_time() - started == pytest.approx(5.0)
    assert actor.statistics().dropped == 1
