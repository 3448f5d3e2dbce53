"""The state directory: where it is, opening its store, and one error for every way it
can be unusable.

Whatever is wrong (the directory is a file, ``supervisor.db`` is a directory, a
corrupt, truncated or foreign file, a schema from a newer version, a read-only file
system), opening raises ``StateError``, whose text is the one line to show:
``state error: <path>: <problem>; <hint>``. The CLI prints it and exits with status 3;
an embedding catches the one type. Nothing is ever reset or rewritten to get past a
problem: audit rows are not ours to drop, so the file is left exactly as found and
the hint says what the operator can do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from actors.transports.instances import InstanceLock, instances_dir
from supervisor.runtime.secrets_key import LOST, KeyFileError, store_keys
from supervisor.settings.model import Config
from supervisor.settings.values import visible
from supervisor.store import DB_FILENAME, Store, StoreError, StoreForeignError, StoreVersionError
from supervisor.store.errors import DatabaseError
from supervisor.store.sealing import Sealer

__all__ = [
    "DEFAULT_STATE_DIR",
    "STATE_DIR_HELP",
    "StateError",
    "check_state_dir",
    "default_state_dir",
    "lock_instance",
    "open_store",
    "resolve_state_dir",
    "state_errors",
]

DEFAULT_STATE_DIR = "~/.local/state/mcp-supervisor"
"""Without ``$XDG_STATE_HOME``; with it, ``$XDG_STATE_HOME/mcp-supervisor`` (``default_state_dir``)."""

STATE_DIR_HELP = (
    "state directory (default: $XDG_STATE_HOME/mcp-supervisor, else ~/.local/state/mcp-supervisor)"
)


def default_state_dir() -> Path:
    """The XDG Base Directory place for state: ``$XDG_STATE_HOME/mcp-supervisor`` when that
    variable holds an absolute path (the spec ignores a relative one), else
    ``~/.local/state/mcp-supervisor``."""
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "mcp-supervisor"
    return Path(DEFAULT_STATE_DIR).expanduser()


MOVE_AWAY = "move the file away (nothing in it was changed) to start with an empty store"
ELSEWHERE = "choose another state directory (--state-dir)"
MOVE_AWAY_AFRESH = "move the file away to start afresh"
NEW_DATABASE = "point store.url at an empty database to start afresh"
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


class StateError(Exception):
    """The state directory or its database cannot be used; ``str()`` is the line to show."""

    def __init__(self, path: str | os.PathLike[str], problem: str, hint: str) -> None:
        self.path = visible(os.fspath(path))
        self.problem = visible(problem)
        self.hint = hint
        super().__init__(f"state error: {self.path}: {self.problem}; {hint}")


def resolve_state_dir(config: Config, state_dir: str | os.PathLike[str] | None) -> Path:
    """The state directory (the argument, else the config's, else the default), created
    0700 if missing. Raises StateError when it cannot be."""
    chosen = state_dir or config.state_dir or default_state_dir()
    path = Path(chosen).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError:
        raise StateError(path, "not a directory", f"move the file away, or {ELSEWHERE}") from None
    except NotADirectoryError:
        raise StateError(
            path, "a file is in the way of this path", f"move that file away, or {ELSEWHERE}"
        ) from None
    except OSError as exc:
        hint = f"make its parent writable, or {ELSEWHERE}" if exc.errno in _READ_ONLY else ELSEWHERE
        raise StateError(path, f"cannot create the directory ({exc.strerror})", hint) from None
    return path


def check_state_dir(config: Config, state_dir: str | os.PathLike[str] | None) -> Path:
    """Open the store, read what a start reads, close it: a command calls this first so
    that a bad state directory is its one line of output (StateError), before any log."""
    path = resolve_state_dir(config, state_dir)
    store = open_store(path, config)
    try:
        with state_errors(store.path):
            for read in (store.tool_lists, store.pins, store.approvals):
                read()
    finally:
        store.close()
    return path


def lock_instance(state_path: Path, kind: str) -> InstanceLock:
    """This supervisor instance's lock in the state directory (see
    ``actors/transports/instances.py``); a failure is a StateError."""
    try:
        return InstanceLock.acquire(state_path, kind)
    except OSError as exc:
        hint = f"make the state directory writable, or {ELSEWHERE}" if exc.errno in _READ_ONLY else ELSEWHERE
        problem = f"cannot take this supervisor's instance lock ({exc.strerror})"
        raise StateError(instances_dir(state_path), problem, hint) from None


def open_store(state_path: Path, config: Config) -> Store:
    """``Store.open`` on the directory's database, or with ``store.url`` the PostgreSQL
    database there (the directory keeps the lock, journals, pidfiles and key), its
    OAuth records sealed with the config's keys (``secrets_key.py``; plaintext ones from
    before are sealed now), every failure a StateError."""
    db_path: Path | str = state_path / DB_FILENAME
    if config.store.url is not None:
        from supervisor.store.postgres import display_url, open_postgres

        db_path = display_url(config.store.url)
        with state_errors(db_path):
            store = open_postgres(config.store.url)
    else:
        with state_errors(db_path):
            store = Store.open(db_path)  # first: an unusable directory is named by its database
    try:
        try:
            sealer = Sealer(store_keys(config, state_path))
        except KeyFileError as exc:
            raise StateError(exc.path, exc.problem, LOST) from None
        with state_errors(db_path):
            store.seal_with(sealer)
    except BaseException:
        store.close()
        raise
    return store


@contextlib.contextmanager
def state_errors(db_path: Path | str) -> Iterator[None]:
    """Turn a StoreError inside into the StateError that says what to do about it."""
    try:
        yield
    except StoreError as exc:
        raise _classify(db_path, exc) from exc


def _classify(db_path: Path | str, exc: StoreError) -> StateError:
    remote = isinstance(db_path, str)
    if isinstance(exc, StoreVersionError):
        return StateError(
            db_path,
            f"the store's schema version {exc.found} is newer than this supervisor supports "
            f"(up to {exc.supported})",
            f"run a newer mcp-supervisor, or {NEW_DATABASE if remote else MOVE_AWAY_AFRESH}",
        )
    if isinstance(exc, StoreForeignError):
        return StateError(
            db_path, f"not a supervisor database ({exc.reason})", NEW_DATABASE if remote else MOVE_AWAY
        )
    cause = exc.__cause__
    if isinstance(cause, DatabaseError):
        return StateError(db_path, str(cause), cause.fix or "check that PostgreSQL at store.url is usable")
    if remote:
        return StateError(db_path, str(exc).removeprefix(f"{db_path}: "), "check store.url")
    if isinstance(cause, IsADirectoryError):
        return StateError(db_path, "a directory, not the database file", f"move it away, or {ELSEWHERE}")
    if isinstance(cause, OSError):
        if cause.errno in _READ_ONLY:
            return StateError(
                db_path, f"cannot write the database ({cause.strerror})", f"make it writable, or {ELSEWHERE}"
            )
        return StateError(db_path, f"cannot open the database ({cause.strerror})", ELSEWHERE)
    if isinstance(cause, sqlite3.Error):
        return _classify_sqlite(db_path, cause)
    return StateError(db_path, str(exc).removeprefix(f"{db_path}: "), ELSEWHERE)


def _classify_sqlite(db_path: Path | str, cause: sqlite3.Error) -> StateError:
    name = getattr(cause, "sqlite_errorname", "") or ""
    if name.startswith("SQLITE_NOTADB"):
        return StateError(db_path, f"not an SQLite database ({cause})", MOVE_AWAY)
    if name.startswith("SQLITE_CORRUPT"):
        return StateError(
            db_path,
            f"the database is damaged ({cause})",
            f"{MOVE_AWAY} (`sqlite3 {DB_FILENAME} .recover` may save its rows)",
        )
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")):
        return StateError(
            db_path,
            f"cannot write the database ({cause})",
            f"make the state directory and the file writable, or {ELSEWHERE}",
        )
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StateError(
            db_path, f"the database is locked by another process ({cause})", "stop that process, or wait"
        )
    return StateError(db_path, f"cannot use the database ({cause})", ELSEWHERE)
