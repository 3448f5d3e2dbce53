"""``Store``: the embedded SQLite database in the state directory (``supervisor.db``),
or a PostgreSQL database (``postgres.py`` opens that one; the methods here are the same).

Everything here is synchronous and may block on disk or the network. In the service,
only the ``StoreActor`` calls it, from Trio worker threads, so the event loop never
waits on the database; startup code may call it directly before the actor runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

from actors.tool_definitions import DefinitionParts
from supervisor.store.audit_search import AuditSearch
from supervisor.store.cluster_rows import ClusterRows
from supervisor.store.errors import DB_ERRORS, StoreError
from supervisor.store.oauth_rows import OAuthRows
from supervisor.store.records import APPROVAL_DECISIONS, AUDIT_COLUMNS, POLICY_CHANNEL, AuditRow, ordered_json
from supervisor.store.schema import SQLITE, Dialect, migrate, prepare
from supervisor.store.tenant_rows import TenantRows

DB_FILENAME = "supervisor.db"
"""The store's file name inside the state directory."""

DEFAULT_BUSY_TIMEOUT_MS = 5_000


def _private_file(path: Path) -> None:
    """Create ``path`` (and a missing parent, 0700) with mode 0600 before SQLite touches it.

    SQLite would create the file with the process umask (often 0644), exposing audit
    rows and approvals to other local users for as long as it takes to chmod. SQLite
    gives the ``-wal`` and ``-shm`` files the main file's mode; existing ones made
    by an older, looser run are tightened too.
    """
    parent = path.parent
    try:
        parent.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass  # an existing directory is the operator's choice; we only tighten our files
    else:
        os.chmod(parent, 0o700)  # mkdir's mode is filtered by the umask
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(f"{path}{suffix}", 0o600)


def _prepare(connection: sqlite3.Connection, db_path: Path, busy_timeout_ms: int) -> None:
    """The pragmas and the migration of ``Store.open`` (see there), in that order."""
    # Version and ownership first: a file from a newer supervisor, or another
    # program's database, is left exactly as found.
    prepare(connection, db_path)
    (mode,) = connection.execute("PRAGMA journal_mode=WAL").fetchone()
    if str(mode).lower() != "wal":
        raise StoreError(
            f"{db_path}: SQLite refused WAL mode (journal_mode={mode}); "
            "put the state directory on a local filesystem"
        )
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("PRAGMA foreign_keys=ON")
    connection.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms):d}")
    migrate(connection, db_path)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED, any extended code."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class Store(OAuthRows, ClusterRows, TenantRows, AuditSearch):
    """The supervisor's store: audit rows, remembered approvals, tool pins, last-known
    tool lists and protocol eras. Open it with ``Store.open`` (SQLite) or
    ``postgres.open_postgres``.

    Threads: the connection is opened with ``check_same_thread=False`` because its one
    owner (the ``StoreActor``) calls it from whichever Trio worker thread is free, one
    call at a time. An internal lock makes every method atomic with respect to the
    others, so an overlapping reader waits instead of reading inside another thread's
    open transaction.

    Errors: every failure is a ``StoreError`` naming the file (or the PostgreSQL URL
    without its password: ``path`` is then that text).
    """

    def __init__(self, connection: Any, path: Path | str, *, dialect: Dialect = SQLITE) -> None:
        self.path = path
        self.dialect = dialect
        self._connection = connection
        self._lock = threading.RLock()
        self._depth = 0  # open transaction() levels: 0 none, 1 BEGIN, more are savepoints
        self.sealer = None  # OAuth records stay plaintext until ``seal_with`` (oauth_rows.py)

    @property
    def name(self) -> str:
        """The store as health and status name it: ``sqlite``, or the PostgreSQL URL
        without credentials."""
        return "sqlite" if self.dialect is SQLITE else str(self.path)

    @property
    def unavailable(self) -> bool:
        """Whether the database server went away (PostgreSQL; rows wait in the journal
        until it is back). SQLite in the state directory is never away."""
        return bool(getattr(self._connection, "down", False))

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS) -> Self:
        """Open (creating if needed) and migrate the store at ``path``.

        Pragmas, and why:

        - ``journal_mode=WAL``: readers never block the writer, and a commit is one
          append to the log.
        - ``synchronous=NORMAL``: under WAL this is crash-safe for us. A commit is in the
          WAL file (the OS page cache) when COMMIT returns, so killing the process, even
          with SIGKILL, loses nothing committed; fsync happens at checkpoints, so only an
          OS crash or power loss can roll back the last few commits. Neither ever
          corrupts the file: WAL frames are checksummed and a transaction without its
          commit frame is ignored on recovery.
        - ``foreign_keys=ON``: so future steps may rely on them.
        - ``busy_timeout``: another process (e.g. ``sqlite3`` by an operator) holding
          the lock makes a write wait this long, then fail, instead of failing at once.

        Raises StoreVersionError for a file from a newer supervisor, StoreForeignError
        for another program's SQLite file, StoreError for anything else (not a
        database, unwritable directory, no WAL support).
        """
        db_path = Path(path)
        try:
            _private_file(db_path)
            connection = sqlite3.connect(
                db_path,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,  # autocommit: our BEGIN/COMMIT are the only transactions
                check_same_thread=False,
            )
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"{db_path}: cannot open the store: {exc}") from exc
        try:
            deadline = time.monotonic() + busy_timeout_ms / 1000
            while True:
                try:
                    _prepare(connection, db_path, busy_timeout_ms)
                    break
                except sqlite3.OperationalError as exc:
                    # Switching a new file to WAL (and a migration step) upgrades a read
                    # lock to a write lock. When another process does the same at that
                    # moment, SQLite answers "locked" at once instead of waiting out the
                    # busy timeout (waiting could deadlock): several instances started
                    # together on a fresh state directory. Every step here is safe to
                    # try again, so try again until the busy timeout is spent.
                    if not _is_busy(exc) or time.monotonic() >= deadline:
                        raise
                    time.sleep(random.uniform(0.002, 0.02))
        except sqlite3.Error as exc:
            connection.close()
            raise StoreError(f"{db_path}: cannot open the store: {exc}") from exc
        except BaseException:
            connection.close()
            raise
        return cls(connection, db_path)

    def close(self) -> None:
        """Close the connection (idempotent). Later calls raise StoreError.

        Waits for a write another thread has in progress, so a transaction is never
        cut off by its own connection closing.
        """
        with self._lock:
            self._connection.close()

    def interrupt(self) -> None:
        """Abort the statement another thread is running (it fails and rolls back).

        Takes no lock, by design: it is how a shutdown deadline stops a write that
        holds the lock.
        """
        with contextlib.suppress(sqlite3.ProgrammingError):  # already closed
            self._connection.interrupt()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ transactions

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Make the writes inside one atomic commit.

        An exception inside rolls the writes back and propagates (sqlite3 errors as
        StoreError). Nested, it is a savepoint: its failure undoes only its own writes,
        so a caller that catches it may still commit the rest.
        """
        with self._lock:
            depth = self._depth
            savepoint = f"nested_{depth}"
            with self._errors("begin a transaction"):
                self._connection.execute(f"SAVEPOINT {savepoint}" if depth else "BEGIN IMMEDIATE")
            self._depth = depth + 1
            try:
                with self._errors("write"):
                    yield
            except BaseException:
                with contextlib.suppress(*DB_ERRORS):  # e.g. interrupted: already rolled back
                    if depth:
                        self._connection.execute(f"ROLLBACK TO {savepoint}")
                        self._connection.execute(f"RELEASE {savepoint}")
                    else:
                        self._connection.execute("ROLLBACK")
                raise
            else:
                try:
                    self._connection.execute(f"RELEASE {savepoint}" if depth else "COMMIT")
                except DB_ERRORS as exc:
                    if not depth:  # never leave a half-open transaction behind for the next BEGIN
                        with contextlib.suppress(*DB_ERRORS):
                            self._connection.execute("ROLLBACK")
                    raise StoreError(f"{self.path}: cannot commit: {exc}") from exc
            finally:
                self._depth = depth

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except DB_ERRORS as exc:
            raise StoreError(f"{self.path}: cannot {doing}: {exc}") from exc

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._errors("read"):
            rows: list[tuple[Any, ...]] = self._connection.execute(sql, params).fetchall()
            return rows

    # ------------------------------------------------------------------ audit

    def add_audit(self, rows: Sequence[AuditRow]) -> None:
        """Append audit rows, all or none (one transaction). A row whose ``record`` id is
        in the table already is skipped: folding a journal twice adds nothing."""
        values = [
            (
                r.at, r.tenant, r.session, r.tool, r.server, r.decision, r.outcome,
                r.duration_ms, r.args_sha256, r.args_bytes, r.result_bytes, r.record, r.trace_id,
                r.person, r.replica, r.cancelled_by,
            )
            for r in rows
        ]  # fmt: skip
        with self.transaction():
            self._connection.executemany(
                f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (record) DO NOTHING",
                values,
            )

    def audit_rows(
        self, *, tenant: str | None = None, session: str | None = None, limit: int = 100
    ) -> list[AuditRow]:
        """Audit rows newest first (insertion order breaks ties), optionally for one
        tenant and/or one session; at most ``limit``."""
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        where, params = [], []
        if tenant is not None:
            where.append("tenant = ?")
            params.append(tenant)
        if session is not None:
            where.append("session = ?")
            params.append(session)
        sql = f"SELECT {AUDIT_COLUMNS} FROM audit"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY at DESC, id DESC LIMIT ?"
        return [AuditRow(*row) for row in self._read(sql, [*params, limit])]

    def audit_between(self, since: float, until: float, person: str | None = None) -> list[AuditRow]:
        """Rows with ``since <= at < until`` (of one person), oldest first: an export."""
        sql = f"SELECT {AUDIT_COLUMNS} FROM audit WHERE at >= ? AND at < ?"
        params: list[object] = [since, until]
        if person is not None:
            sql, params = sql + " AND person = ?", [*params, person]
        return [AuditRow(*row) for row in self._read(sql + " ORDER BY at, id", params)]

    def purge_audit(self, *, before: float | None = None, person: str | None = None) -> int:
        """Delete the rows older than ``before`` or of ``person`` (retention, or a person
        asking to be forgotten); how many went."""
        if (before is None) == (person is None):
            raise ValueError("purge_audit takes exactly one of before= and person=")
        where, value = ("at < ?", before) if person is None else ("person = ?", person)
        with self.transaction():
            deleted: int = self._connection.execute(f"DELETE FROM audit WHERE {where}", (value,)).rowcount
            return deleted

    # ------------------------------------------------------------------ approvals

    def remember_approval(self, tenant: str, permission: str, fingerprint: str, decision: str) -> None:
        """Remember an "always" answer for (tenant, permission), replacing an older one.

        ``fingerprint`` is the tool definition's pin when the answer was given: a
        changed tool must be asked about again (pinning, ``trust.apply_pin``).
        """
        if decision not in APPROVAL_DECISIONS:
            raise ValueError(f"a remembered approval is 'allow' or 'deny', not {decision!r}")
        with self.transaction():
            self._connection.execute(
                "INSERT INTO approvals (tenant, permission, fingerprint, decision) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (tenant, permission)"
                " DO UPDATE SET fingerprint = excluded.fingerprint, decision = excluded.decision",
                (tenant, permission, fingerprint, decision),
            )
            self._announce("always", tenant, permission, fingerprint, decision)

    def approvals(self) -> dict[tuple[str, str], tuple[str, str]]:
        """``{(tenant, permission): (fingerprint, decision)}`` for every remembered answer."""
        rows = self._read("SELECT tenant, permission, fingerprint, decision FROM approvals")
        return {(tenant, permission): (fp, decision) for tenant, permission, fp, decision in rows}

    def forget_approval(self, tenant: str, permission: str) -> None:
        """Drop a remembered answer; forgetting an unknown one is fine."""
        with self.transaction():
            self._connection.execute(
                "DELETE FROM approvals WHERE tenant = ? AND permission = ?", (tenant, permission)
            )
            self._announce("forget", tenant, permission)

    def _announce(self, *change: str | None) -> None:
        """Tell every supervisor on this PostgreSQL database, at this transaction's commit
        (``policy_feed.py``); SQLite has no one to tell."""
        if self.dialect is not SQLITE:
            self._connection.execute("SELECT pg_notify(?, ?)", (POLICY_CHANNEL, json.dumps(change)))

    def listen(self) -> Any:
        """A connection of its own, listening for ``_announce`` (PostgreSQL only)."""
        return self._connection.listen(POLICY_CHANNEL)

    # ------------------------------------------------------------------ pins

    def set_pin(self, server: str, tool: str, fingerprint: str, parts: DefinitionParts | None = None) -> None:
        """Pin a tool's definition fingerprint (description + schema hash), replacing the
        old pin; ``parts``: the hash of each part, to say later what changed."""
        description, schema = (None, None) if parts is None else (parts.description, parts.input_schema)
        with self.transaction():
            self._connection.execute(
                "INSERT INTO pins (server, tool, fingerprint, description_sha256, input_schema_sha256)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (server, tool) DO UPDATE SET"
                " fingerprint = excluded.fingerprint, description_sha256 = excluded.description_sha256,"
                " input_schema_sha256 = excluded.input_schema_sha256",
                (server, tool, fingerprint, description, schema),
            )
            self._announce("pin", server, tool, fingerprint, description, schema)

    def pins(self) -> dict[tuple[str, str], str]:
        """``{(server, tool): fingerprint}``."""
        rows = self._read("SELECT server, tool, fingerprint FROM pins")
        return {(server, tool): fingerprint for server, tool, fingerprint in rows}

    def pin_parts(self) -> dict[tuple[str, str], DefinitionParts]:
        """``{(server, tool): the pinned definition's part hashes}``, for the pins that
        keep them (not those set before the store kept them)."""
        rows = self._read(
            "SELECT server, tool, description_sha256, input_schema_sha256 FROM pins"
            " WHERE description_sha256 IS NOT NULL AND input_schema_sha256 IS NOT NULL"
        )
        return {(server, tool): DefinitionParts(d, s) for server, tool, d, s in rows}

    # ------------------------------------------------------------------ tool lists

    def save_tool_list(
        self,
        server: str,
        tools: Sequence[Mapping[str, Any]],
        listed_at: float,
        surface: Mapping[str, Any] | None = None,
    ) -> None:
        """Replace the server's last-known tool list (kept as JSON, in the server's key
        order), listed at unix time ``listed_at``: lets search answer for a lazy server
        before it starts, with the tools' schemas as the server sent them. ``surface``:
        the rest of that listing (resources, templates, prompts, features; None: not
        known), so its resources and prompts are listed before it starts too."""
        data = ordered_json(list(tools))
        rest = None if surface is None else ordered_json(dict(surface))
        with self.transaction():
            self._connection.execute(
                "INSERT INTO tool_lists (server, tools, listed_at, surface) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (server) DO UPDATE SET tools = excluded.tools,"
                " listed_at = excluded.listed_at, surface = excluded.surface",
                (server, data, listed_at, rest),
            )

    def tool_lists(self) -> dict[str, tuple[list[dict[str, Any]], float]]:
        """``{server: (tools, listed_at)}`` for every server with a saved list."""
        rows = self._read("SELECT server, tools, listed_at FROM tool_lists")
        return {server: (cast(list[dict[str, Any]], json.loads(data)), at) for server, data, at in rows}

    def surfaces(self) -> dict[str, dict[str, Any]]:
        """``{server: surface}`` for every saved list that has the rest of its listing
        (``save_tool_list``'s ``surface``; a row from before schema 6 has none)."""
        rows = self._read("SELECT server, surface FROM tool_lists WHERE surface IS NOT NULL")
        return {server: cast(dict[str, Any], json.loads(data)) for server, data in rows}

    # ------------------------------------------------------------------ protocol eras

    def save_era(self, server: str, era: str | None, found_at: float) -> None:
        """Remember (or with None forget) the protocol era a server was found to speak
        (``actors.protocol.era.Era`` values), at unix time ``found_at``."""
        with self.transaction():
            if era is None:
                self._connection.execute("DELETE FROM eras WHERE server = ?", (server,))
                return
            self._connection.execute(
                "INSERT INTO eras (server, era, found_at) VALUES (?, ?, ?)"
                " ON CONFLICT (server) DO UPDATE SET era = excluded.era, found_at = excluded.found_at",
                (server, era, found_at),
            )

    def eras(self) -> dict[str, str]:
        """``{server: era}`` for every server with a remembered era."""
        return {server: era for server, era in self._read("SELECT server, era FROM eras")}
