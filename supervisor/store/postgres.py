"""PostgreSQL under the store: ``open_postgres(url)``, a ``Store`` on one psycopg connection.

Why synchronous psycopg, one connection, in the store's worker thread (as SQLite): the
store's writers are already one actor that batches writes into transactions off the
event loop (``actor.py``), and every read and write goes through the ``Store``'s lock,
so a pool or an async driver would add a second concurrency model without adding
concurrency. The SQL stays the store's own: this adapter turns its ``?`` placeholders
into psycopg's ``%s``, ``BEGIN IMMEDIATE`` into ``BEGIN``, and drops SQLite's pragmas.

A server that goes away: the statement fails (``DatabaseError`` with ``failed``, which
the actor counts and the journal keeps the rows of), and the next statement outside a
transaction connects again. psycopg is imported here only, on first use, so that
``import supervisor`` imports no driver.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from supervisor.store.errors import DatabaseError

if TYPE_CHECKING:
    import psycopg

    from supervisor.store.database import Store

SCHEMES = ("postgresql", "postgres")
CONNECT_TIMEOUT_S = 5
"""Seconds to wait for the server: short, so an unreachable one is a prompt error."""


def display_url(url: str) -> str:
    """``postgresql://host:port/db``: the store named without its user or password
    (read without psycopg, so that naming the store never needs the driver)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "localhost", parts.port or 5432
    except ValueError:  # a bad port: name it without anything after the scheme
        return "postgresql://?"
    host = f"[{host}]" if ":" in host else host
    return f"postgresql://{host}:{port}{parts.path or '/'}"


def _diagnosis(message: str) -> tuple[str, str]:
    """What a connection's failure is and what to do about it, read from libpq's words."""
    if "password authentication failed" in message or "no password supplied" in message:
        return "wrong credentials", "check the user and password in store.url"
    if "database" in message and "does not exist" in message:
        return "no such database", "create it, or correct the database name in store.url"
    if "role" in message and "does not exist" in message:
        return "no such role", "create it, or correct the user in store.url"
    return "unreachable", "check that PostgreSQL runs and listens at store.url's host and port"


def psycopg_error() -> type[Exception]:
    """psycopg's base error, imported on first use."""
    import psycopg

    return psycopg.Error


class _Nothing:
    """The result of a statement PostgreSQL has no use for (an SQLite pragma)."""

    rowcount = 0

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[Any]:
        return []


class PgConnection:
    """The part of ``sqlite3.Connection`` the store uses, on a psycopg connection in
    autocommit mode (the store's BEGIN and COMMIT are the only transactions)."""

    def __init__(self, url: str, name: str, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self.name = name
        self._url = url
        self._timeout = max(1, round(connect_timeout_s))
        self._closed = False
        self._in_transaction = False
        self.down = False  # the server went away: set by a failure, cleared by the next success
        self._conn: psycopg.Connection[Any] = self._connect()

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg

        try:
            return psycopg.connect(self._url, autocommit=True, connect_timeout=self._timeout)
        except psycopg.Error as exc:
            detail = " ".join(str(exc).split()).removeprefix("connection failed: ") or type(exc).__name__
            what, fix = _diagnosis(detail)
            raise DatabaseError(f"{what} ({detail})", failed=True, fix=fix) from None

    def listen(self, channel: str) -> psycopg.Connection[Any]:
        """A second connection to the same database, listening on ``channel``."""
        listener = self._connect()
        try:
            listener.execute(f"LISTEN {channel}")
        except psycopg_error() as exc:
            listener.close()
            raise DatabaseError(" ".join(str(exc).split()), failed=True) from None
        return listener

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement in the store's dialect; psycopg's errors as DatabaseError."""
        import psycopg

        word = sql.lstrip().split(None, 1)[0].upper()
        if word == "PRAGMA":
            return _Nothing()
        if sql == "BEGIN IMMEDIATE":  # SQLite's write lock at once; a PostgreSQL row locks when written
            sql = "BEGIN"
        if self._closed:
            raise DatabaseError("cannot operate on a closed store", failed=False)
        try:
            if self._conn.closed and (word == "BEGIN" or not self._in_transaction):
                self._conn = self._connect()  # reconnect: nothing of a transaction to lose
            cursor = self._conn.execute(sql.replace("?", "%s"), list(params) if params else None)
        except (psycopg.Error, DatabaseError) as exc:
            raise self._failure(exc) from None
        finally:
            if word in ("COMMIT", "ROLLBACK"):
                self._in_transaction = False
        if word == "BEGIN":
            self._in_transaction = True
        self.down = False
        return cursor

    def _failure(self, exc: Exception) -> DatabaseError:
        import psycopg

        if isinstance(exc, DatabaseError):  # a reconnect that failed
            self.down = True
            return exc
        failed = isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
        self.down = self.down or (failed and self._conn.closed)
        return DatabaseError(" ".join(str(exc).split()) or type(exc).__name__, failed=failed)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        import psycopg

        try:
            with self._conn.cursor() as cursor:
                cursor.executemany(sql.replace("?", "%s"), list(rows))
                return cursor
        except psycopg.Error as exc:
            raise self._failure(exc) from None

    def interrupt(self) -> None:
        """Cancel the statement running on the server (a shutdown deadline)."""
        with contextlib.suppress(Exception):  # closed, or the server gone: nothing left to cancel
            self._conn.cancel_safe(timeout=1)

    def close(self) -> None:
        self._closed = True
        self._conn.close()


def open_postgres(url: str, *, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> Store:
    """A migrated ``Store`` on the PostgreSQL database at ``url``; StoreError (naming the
    store without its password) when it cannot be."""
    from supervisor.store.database import Store
    from supervisor.store.errors import StoreError
    from supervisor.store.schema import POSTGRES, prepare

    name = display_url(url)
    try:
        connection = PgConnection(url, name, connect_timeout_s)
    except DatabaseError as exc:
        raise StoreError(f"{name}: cannot open the store: {exc}") from exc
    try:
        prepare(connection, name, POSTGRES)
    except DatabaseError as exc:
        connection.close()
        raise StoreError(f"{name}: cannot open the store: {exc}") from exc
    except BaseException:
        connection.close()
        raise
    return Store(connection, name, dialect=POSTGRES)
