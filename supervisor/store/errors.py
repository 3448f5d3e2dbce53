"""What the store raises.

::

    StoreError                  any failure to open, read or write <state_dir>/supervisor.db
    ├── StoreVersionError       the file was written by a newer supervisor (schema too new)
    └── StoreForeignError       an SQLite file, but not one of ours

``sqlite3`` and ``OSError`` exceptions become these at the store's edge, so callers
catch one family and the message always names the file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


class StoreError(Exception):
    """The store could not do what was asked; the message names the file and the cause."""


class StoreVersionError(StoreError):
    """The database's schema is newer than this supervisor understands.

    Refusing is the only safe answer: an older migration list cannot know what a newer
    schema means, and writing into it could corrupt data the newer version relies on.
    """

    def __init__(self, path: Path, found: int, supported: int) -> None:
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

    def __init__(self, path: Path, reason: str) -> None:
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
    return isinstance(cause, sqlite3.OperationalError)
