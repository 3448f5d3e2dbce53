"""The store's schema as an ordered list of migration steps.

The schema version is SQLite's ``PRAGMA user_version`` (a field in the file header):
version *n* means steps ``1..n`` have been applied. Each step runs in its own
``BEGIN IMMEDIATE`` transaction together with the version bump, so a crash or an error
mid-step leaves the file at the previous version with none of the step's changes
(SQLite DDL is transactional). The write lock also makes two processes opening the same
file at once safe: the loser re-reads the version under the lock and finds the work done.

Append new steps; never edit or reorder a released one, because files in the field
record only a number.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from supervisor.store.errors import StoreForeignError, StoreVersionError

Step = Sequence[str]
"""One migration step: SQL statements applied together."""

MIGRATIONS: tuple[Step, ...] = (
    # 1: the four tables.
    (
        """
        CREATE TABLE audit (
            id           INTEGER PRIMARY KEY,  -- insertion order: breaks ties between equal times
            at           REAL    NOT NULL,
            tenant       TEXT    NOT NULL,
            session      TEXT    NOT NULL,
            tool         TEXT    NOT NULL,
            server       TEXT    NOT NULL,
            decision     TEXT    NOT NULL CHECK (decision IN ('allow', 'ask', 'deny', 'none')),
            outcome      TEXT    NOT NULL,
            duration_ms  INTEGER NOT NULL,
            args_sha256  TEXT    NOT NULL,
            args_bytes   INTEGER NOT NULL,
            result_bytes INTEGER NOT NULL
        )
        """,
        """
        CREATE TABLE approvals (
            tenant      TEXT NOT NULL,
            permission  TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            decision    TEXT NOT NULL CHECK (decision IN ('allow', 'deny')),
            PRIMARY KEY (tenant, permission)
        )
        """,
        """
        CREATE TABLE pins (
            server      TEXT NOT NULL,
            tool        TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            PRIMARY KEY (server, tool)
        )
        """,
        """
        CREATE TABLE tool_lists (
            server    TEXT PRIMARY KEY,
            tools     TEXT NOT NULL,  -- JSON array of tool definitions
            listed_at REAL NOT NULL
        )
        """,
    ),
    # 2: the admin API reads audit rows newest first, per tenant or per session; without
    # these it sorts the whole table on every request. (rowid is implied in each index, so
    # ``ORDER BY at DESC, id DESC`` needs no sort either.)
    (
        "CREATE INDEX audit_by_time ON audit (at)",
        "CREATE INDEX audit_by_tenant ON audit (tenant, at)",
        "CREATE INDEX audit_by_session ON audit (session, at)",
    ),
    # 3: OAuth records of remote servers (client, endpoints, tokens with absolute expiry),
    # keyed by server name and URL: a server pointed elsewhere starts afresh.
    (
        """
        CREATE TABLE oauth (
            server     TEXT NOT NULL,
            url        TEXT NOT NULL,
            record     TEXT NOT NULL,  -- JSON (actors.auth.records.AuthRecord)
            updated_at REAL NOT NULL,
            PRIMARY KEY (server, url)
        )
        """,
    ),
    # 4: each audit row carries the id of its journal record (``supervisor.store.journal``),
    # unique, so that folding a journal into the table twice (a crash during the fold, a
    # row the store actor wrote already) inserts each row once. Rows from before have none.
    (
        "ALTER TABLE audit ADD COLUMN record TEXT",
        "CREATE UNIQUE INDEX audit_by_record ON audit (record)",
    ),
    # 5: the protocol era each server was last found to speak ("2025-11-25": the
    # initialize handshake, "2026-07-28": per-request), so the next start goes straight
    # to it instead of probing. A server with no row is probed.
    (
        """
        CREATE TABLE eras (
            server   TEXT PRIMARY KEY,
            era      TEXT NOT NULL,
            found_at REAL NOT NULL
        )
        """,
    ),
    # 6: the rest of each server's last listing beside its tools (JSON: resources,
    # templates and prompts as the server sent them, and the features it declared), so
    # a lazy server's resources and prompts are listed before it starts, like its
    # tools. A row from before has none: that server's surface is unknown until it lists.
    ("ALTER TABLE tool_lists ADD COLUMN surface TEXT",),
    # 7: a pin keeps the hash of each part of the definition it pins (description, input
    # schema), so that a tool asked about again can say what changed. Pins from before
    # have none: theirs say that the description or the input schema changed.
    (
        "ALTER TABLE pins ADD COLUMN description_sha256 TEXT",
        "ALTER TABLE pins ADD COLUMN input_schema_sha256 TEXT",
    ),
    # 8: a traced call's row keeps its trace id (32 hex digits), so a row leads to its
    # trace and a trace to its row. Untraced rows, and rows from before, have none.
    ("ALTER TABLE audit ADD COLUMN trace_id TEXT",),
    # 9: who the call was made for (the caller's person: a static-token caller's is its
    # tenant name), so an operator can export or purge one person's rows. Rows from
    # before have none. (Appended, not numbered: a merge may put it after another step.)
    (
        "ALTER TABLE audit ADD COLUMN person TEXT",
        "CREATE INDEX audit_by_person ON audit (person, at)",
    ),
    # 10: OAuth records are kept per person too (a ``per_user`` server's tokens are each
    # person's own); a shared server's record has person "", so every row from before
    # stays what it was. SQLite cannot change a primary key in place: the table is
    # rebuilt, its rows copied as they are (sealed ones still open: their associated
    # data for person "" is unchanged, ``sealing.bound_to``).
    (
        "ALTER TABLE oauth RENAME TO oauth_before_person",
        """
        CREATE TABLE oauth (
            server     TEXT NOT NULL,
            url        TEXT NOT NULL,
            person     TEXT NOT NULL DEFAULT '',  -- '' for a shared server's record
            record     TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (server, url, person)
        )
        """,
        "INSERT INTO oauth (server, url, person, record, updated_at)"
        " SELECT server, url, '', record, updated_at FROM oauth_before_person",
        "DROP TABLE oauth_before_person",
    ),
)


SCHEMA_VERSION = len(MIGRATIONS)
"""The version a freshly migrated file has."""


def schema_version(connection: sqlite3.Connection) -> int:
    """The file's schema version (0 for a new, empty file)."""
    row = connection.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def check_version(connection: sqlite3.Connection, path: Path, steps: Sequence[Step] = MIGRATIONS) -> int:
    """The file's version; StoreVersionError when it is newer than ``steps`` know."""
    found = schema_version(connection)
    if found > len(steps):
        raise StoreVersionError(path, found, len(steps))
    return found


_CREATE_TABLE = re.compile(r"\bCREATE\s+TABLE\s+(\w+)", re.IGNORECASE)
_SHOWN = 5


def tables_of(steps: Sequence[Step]) -> set[str]:
    """The tables ``steps`` create (read from their SQL, so a new step counts at once)."""
    return {name for step in steps for statement in step for name in _CREATE_TABLE.findall(statement)}


def check_ours(
    connection: sqlite3.Connection, path: Path, found: int, steps: Sequence[Step] = MIGRATIONS
) -> None:
    """StoreForeignError unless the file is ours at version ``found``: a file at version 0
    holds nothing yet (a new file), one at version n holds the tables steps 1..n create.

    Read-only, so a refused file stays exactly as it was.
    """
    names = [
        str(name)
        for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
    ]
    if found == 0 and names:
        raise StoreForeignError(path, f"it holds {_listing(names)}, and no supervisor schema version")
    missing = sorted(tables_of(steps[:found]) - set(names))
    if missing:
        raise StoreForeignError(path, f"schema version {found}, but without the tables {_listing(missing)}")


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(repr(name) for name in sorted(names)[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def migrate(connection: sqlite3.Connection, path: Path, steps: Sequence[Step] = MIGRATIONS) -> int:
    """Apply the missing steps, one transaction each; return the final version.

    ``connection`` must be in autocommit mode (``isolation_level=None``) so that the
    transactions here are the only ones.
    """
    if check_version(connection, path, steps) == len(steps):
        return len(steps)  # the common case: no write lock taken
    while True:
        connection.execute("BEGIN IMMEDIATE")
        try:
            current = check_version(connection, path, steps)  # again, now under the lock
            if current == len(steps):
                connection.execute("ROLLBACK")
                return current
            for statement in steps[current]:
                connection.execute(statement)
            # PRAGMA takes no parameters; the value is our own int.
            connection.execute(f"PRAGMA user_version = {current + 1:d}")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
