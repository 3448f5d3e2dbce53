"""What the store raises.

::

    StoreError                  any failure to open, read or write the store
    ├── StoreVersionError       the database was written by a newer supervisor (schema too new)
    └── StoreForeignError       a database, but not one of ours

``sqlite3``, PostgreSQL (``DatabaseError``) and ``OSError`` exceptions become these at
the store's edge, so callers catch one family and the message always names the store
(the SQLite file, or the PostgreSQL URL without its password).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


class DatabaseError(Exception):
    """What a PostgreSQL store's connection raised (``postgres.py``), in the terms the
    store needs: ``failed`` when the database itself failed (gone, refused, timed out)
    rather than one statement's data, as ``sqlite3.OperationalError`` says for SQLite;
    ``fix``: what the operator can do, when the driver's words tell."""

    def __init__(self, message: str, *, failed: bool, fix: str | None = None) -> None:
        super().__init__(message)
        self.failed = failed
        self.fix = fix  # what the operator can do, when known


DB_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, DatabaseError)
"""Every error a store's connection raises, either backend."""


class StoreError(Exception):
    """The store could not do what was asked; the message names the file and the cause."""


class StoreVersionError(StoreError):
    """The database's schema is newer than this supervisor understands.

    Refusing is the only safe answer: an older migration list cannot know what a newer
    schema means, and writing into it could corrupt data the newer version relies on.
    """

    def __init__(self, path: Path | str, found: int, supported: int) -> None:
        super().__init__(
            f"{path}: store schema version {found} is newer than this supervisor supports "
            f"(up to {supported}); run a newer mcp-supervisor, or move the file away to start afresh"
        )
        self.path = path
        self.found = found
        self.supported = supported


class StoreForeignError(StoreError):
    """The file is an SQLite database, but not the supervisor's (another program's file,
    or ours with tables missing).

    Migrating it would add our tables to someone else's data, so it is refused and left
    as it is.
    """

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: not a supervisor database ({reason}); move the file away to start afresh")
        self.path = path
        self.reason = reason


def failure_text(error: BaseException) -> str:
    """A write's failure in a few words: what the database said (a StoreError's cause,
    sqlite3's), else the error itself."""
    cause = error.__cause__ if isinstance(error, StoreError) and error.__cause__ is not None else error
    return str(cause) or type(cause).__name__


def database_failed(exc: BaseException) -> bool:
    """Whether the database itself failed (locked, full, I/O error, interrupted) rather
    than one message's data: a condition to name, not a bug to trace."""
    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    return isinstance(cause, sqlite3.OperationalError) or (isinstance(cause, DatabaseError) and cause.failed)
