"""A state directory that cannot be used is one ``state error`` line and exit status 3.

Each bad case runs the real CLI (``serve`` and ``auth login``) in a subprocess and
checks: exit status 3, exactly one stderr line ``state error: <path>: <problem>;
<hint>``, and the database byte-for-byte as it was (never a silent reset of audit
rows). An embedding gets ``StateError`` from ``Supervisor.open``.

The read-only file system is a real read-only bind mount inside ``unshare -rm`` (as
root, chmod would not stop us); without one, a non-root run falls back to a read-only
directory, and a root run without mount namespaces skips that single case.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from supervisor import StateError, Supervisor
from supervisor.runtime.state_dir import resolve_state_dir
from supervisor.settings.model import Config
from supervisor.store import SCHEMA_VERSION, AuditRow, Store

CLI = [sys.executable, "-m", "supervisor.cli"]
LINE = re.compile(r"state error: (?P<path>[^:]+): (?P<problem>[^;]+); (?P<hint>.+)")
REMOTE = {"servers": {"docs": {"url": "https://127.0.0.1:1/mcp", "oauth": {}}}}


def good_store(state: Path) -> Path:
    """A state directory whose store holds audit rows, as a real run leaves it."""
    db = state / "supervisor.db"
    with Store.open(db) as store:
        row = AuditRow(0.0, "t", "s", "srv_tool", "srv", "allow", "ok", 1, "h", 2, 3)
        rows = [attrs.evolve(row, at=float(n)) for n in range(50)]
        store.add_audit(rows)
        store.save_tool_list("srv", [{"name": "tool", "inputSchema": {"type": "object"}}], 1.0)
    assert not (state / "supervisor.db-wal").exists()  # closed: everything is in the file
    return db


def truncated(state: Path) -> Path:
    db = good_store(state)
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    return db


def corrupt(state: Path) -> Path:
    db = good_store(state)
    data = bytearray(db.read_bytes())
    data[:16] = b"not sqlite at al"  # the header's magic string
    db.write_bytes(bytes(data))
    return db


def foreign(state: Path) -> Path:
    state.mkdir()
    db = state / "supervisor.db"
    with sqlite3.connect(db) as connection:  # another program's database
        connection.execute("CREATE TABLE notes (body TEXT)")
        connection.execute("INSERT INTO notes VALUES ('keep me')")
    connection.close()
    return db


def with_version(db: Path, version: int) -> Path:
    with sqlite3.connect(db) as connection:
        if connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_version'").fetchone():
            connection.execute(f"UPDATE schema_version SET version = {version:d}")
        else:  # a file from before the version table
            connection.execute(f"PRAGMA user_version = {version:d}")
    connection.close()
    return db


def foreign_versioned(state: Path) -> Path:
    return with_version(foreign(state), 2)


def future(state: Path) -> Path:
    return with_version(good_store(state), 99)


def db_is_a_directory(state: Path) -> Path:
    (state / "supervisor.db").mkdir(parents=True)
    (state / "supervisor.db" / "keep").write_text("x")
    return state / "supervisor.db" / "keep"


def state_is_a_file(state: Path) -> Path:
    state.write_text("my notes\n")
    return state


# case -> (make it, the path the line names, the problem, a part of the hint)
CASES: dict[str, tuple[Callable[[Path], Path], str, str, str]] = {
    "truncated": (truncated, "supervisor.db", "the database is damaged (database disk "
                  "image is malformed)", "move the file away (nothing in it was changed)"),
    "corrupt": (corrupt, "supervisor.db", "not an SQLite database (file is not a database)",
                "move the file away (nothing in it was changed)"),
    "foreign": (foreign, "supervisor.db", "not a supervisor database (it holds 'notes', and no "
                "supervisor schema version)", "move the file away"),
    "foreign-versioned": (foreign_versioned, "supervisor.db", "not a supervisor database (schema "
                          "version 2, but without the tables 'approvals', 'audit', 'pins', "
                          "'tool_lists')", "move the file away"),
    "future-version": (future, "supervisor.db", "the store's schema version 99 is newer than this "
                       f"supervisor supports (up to {SCHEMA_VERSION})", "run a newer mcp-supervisor"),
    "db-is-a-directory": (db_is_a_directory, "supervisor.db", "a directory, not the database file",
                          "move it away"),
    "state-is-a-file": (state_is_a_file, "", "not a directory", "move the file away"),
}  # fmt: skip


def run_cli(*args: str, wrap: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "MCP_SUPERVISOR_CONFIG"}
    return subprocess.run(
        [*(wrap or []), *CLI, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def command_line(command: str, config: Path, state: Path) -> list[str]:
    if command == "serve":
        return ["serve", "--config", str(config), "--state-dir", str(state), "--bind", "127.0.0.1:0"]
    return ["auth", "login", "docs", "--config", str(config), "--state-dir", str(state), "--timeout", "1"]


def assert_one_state_error(
    result: subprocess.CompletedProcess[str], path: Path, problem: str, hint: str
) -> None:
    assert result.returncode == 3, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[-3000:]
    match = LINE.fullmatch(lines[0])
    assert match, lines[0]
    assert (match["path"], match["problem"]) == (str(path), problem)
    assert hint in match["hint"]
    assert result.stdout == ""


def snapshot(path: Path) -> tuple[str, bytes]:
    if path.is_dir():
        return "dir", json.dumps(sorted(os.listdir(path))).encode()
    return "file", path.read_bytes()


@pytest.mark.parametrize("command", ["serve", "auth-login"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_state_is_one_line_exit_3_and_leaves_the_file_alone(
    tmp_path: Path, command: str, case: str
) -> None:
    make, named, problem, hint = CASES[case]
    state = tmp_path / "state"
    kept = make(state)
    before = snapshot(kept)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(REMOTE))
    result = run_cli(*command_line(command, config, state))
    assert_one_state_error(result, state / named if named else state, problem, hint)
    assert snapshot(kept) == before
    if kept.name == "supervisor.db":
        assert not (state / "supervisor.db-wal").exists()  # not even opened for writing


def _read_only_wrapper(state: Path) -> list[str] | None:
    """A command prefix that runs the CLI with ``state`` on a read-only bind mount."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'
    probe = subprocess.run(
        [unshare, "-rm", "sh", "-c", script, str(state), "sh", "-c", f'! touch "{state}/probe" 2>/dev/null'],
        capture_output=True,
        timeout=10,
        check=False,
    )
    if probe.returncode != 0:
        return None
    return [unshare, "-rm", "sh", "-c", script, str(state)]


@pytest.mark.parametrize("command", ["serve", "auth-login"])
@pytest.mark.parametrize("fresh", [False, True], ids=["existing-store", "no-store-yet"])
def test_read_only_file_system_is_one_line_exit_3(tmp_path: Path, command: str, fresh: bool) -> None:
    state = tmp_path / "state"
    if fresh:
        state.mkdir()
    else:
        good_store(state)
    db = state / "supervisor.db"
    before = None if fresh else db.read_bytes()
    wrap = _read_only_wrapper(state)
    if wrap is None:
        if os.geteuid() == 0:
            pytest.skip("no read-only bind mount here (unshare -rm failed) and root ignores a chmod")
        state.chmod(0o500)
        wrap = []
    config = tmp_path / "config.json"
    config.write_text(json.dumps(REMOTE))
    try:
        result = run_cli(*command_line(command, config, state), wrap=wrap)
    finally:
        state.chmod(0o700)
    assert result.returncode == 3, result.stderr[-3000:]
    (line,) = result.stderr.splitlines()
    match = LINE.fullmatch(line)
    assert match, line
    assert match["path"] == str(db)
    assert match["problem"].startswith("cannot write the database (")
    assert "writable" in match["hint"]
    if before is not None:
        assert db.read_bytes() == before
    else:
        assert not db.exists()


@pytest.mark.parametrize("case", sorted(CASES))
async def test_supervisor_open_raises_state_error(tmp_path: Path, case: str) -> None:
    make, named, problem, hint = CASES[case]
    state = tmp_path / "state"
    kept = make(state)
    before = snapshot(kept)
    with pytest.raises(StateError) as caught:
        async with Supervisor.open(Config(), state_dir=state):
            pytest.fail("opened a bad state directory")
    error = caught.value
    assert (error.path, error.problem) == (str(state / named if named else state), problem)
    assert hint in error.hint
    assert str(error) == f"state error: {error.path}: {error.problem}; {error.hint}"
    assert snapshot(kept) == before


async def test_damage_found_by_the_first_reads_is_a_state_error_too(tmp_path: Path) -> None:
    state = tmp_path / "state"
    db = good_store(state)
    with sqlite3.connect(db) as connection:
        query = "SELECT rootpage FROM sqlite_master WHERE name = 'tool_lists'"
        (root,) = connection.execute(query).fetchone()
        (page_size,) = connection.execute("PRAGMA page_size").fetchone()
    connection.close()
    data = bytearray(db.read_bytes())
    data[(root - 1) * page_size : root * page_size] = b"\xff" * page_size  # the table's b-tree page
    db.write_bytes(bytes(data))
    with pytest.raises(StateError) as caught:
        async with Supervisor.open(Config(), state_dir=state):
            pytest.fail("opened a damaged store")
    assert caught.value.path == str(db)
    assert caught.value.problem.startswith("the database is damaged")
    assert db.read_bytes() == bytes(data)


def test_a_new_and_a_good_state_directory_still_open(tmp_path: Path) -> None:
    from supervisor.runtime.state_dir import check_state_dir

    assert check_state_dir(Config(), tmp_path / "new" / "state") == tmp_path / "new" / "state"
    good_store(tmp_path / "old")
    assert check_state_dir(Config(), tmp_path / "old") == tmp_path / "old"
    with Store.open(tmp_path / "old" / "supervisor.db") as store:
        assert len(store.audit_rows(limit=100)) == 50


def test_a_file_in_the_way_of_the_path_is_a_state_error(tmp_path: Path) -> None:

    (tmp_path / "notes").write_text("x")
    with pytest.raises(StateError) as caught:
        resolve_state_dir(Config(), tmp_path / "notes" / "state")
    assert str(caught.value) == (
        f"state error: {tmp_path / 'notes' / 'state'}: a file is in the way of this path; "
        "move that file away, or choose another state directory (--state-dir)"
    )
