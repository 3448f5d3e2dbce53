"""Supervisor instances sharing one state directory, told apart by a lock each.

Hosts start one ``mcp-supervisor stdio`` per window, ``serve`` may run beside them,
and an embedding host can open a ``Supervisor`` of its own: several supervisor
*instances* then share one state directory. Anything an instance leaves there for
crash recovery (pidfiles of its servers, its audit journal) must be cleaned up by a
later instance only once its writer is dead, and never while it lives.

Each instance holds an exclusive ``flock`` on ``<state_dir>/instances/<id>.lock`` for
as long as it runs. The kernel drops the lock when the holder dies, however it dies
(SIGKILL and OOM included), so "the lock can be taken" is a proof of death that no pid
check can give (pids are reused; an instance in another pid namespace has another
pid). ``flock`` locks belong to an open file description, so two instances inside one
process exclude each other too.

A later instance *claims* a dead one (:func:`claim_dead_instances`): it takes the dead
instance's lock itself, so that two instances starting at once never both recover
the same leftovers, recovers what it must, and only then deletes the lock file.

Instance ids are short, unique and contain no ``:`` (the server marker
``MCP_SUPERVISOR_SERVER=<instance>:<server>`` splits at the first colon).

POSIX only (``fcntl.flock``). Everything here is synchronous and quick.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Self

import attrs

INSTANCE_DIR = "instances"
_SUFFIX = ".lock"
_PARTIAL = ".partial"


def instances_dir(state_dir: Path) -> Path:
    """Where the instance locks live."""
    return Path(state_dir) / INSTANCE_DIR


def new_instance_id() -> str:
    """A fresh id: the pid for a reader's orientation, and 48 random bits for uniqueness."""
    return f"{os.getpid()}-{secrets.token_hex(6)}"


def is_instance_id(text: str) -> bool:
    """Whether ``text`` has the shape of an id this module makes (file-name safe)."""
    pid, sep, token = text.partition("-")
    return bool(sep) and pid.isdigit() and len(token) == 12 and all(c in "0123456789abcdef" for c in token)


def _try_lock(fd: int) -> bool:
    """Take an exclusive flock without waiting; False when another holder has it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


@attrs.define(eq=False)
class InstanceLock:
    """This instance's lock; held from :meth:`acquire` until :meth:`release`.

    Use it as a context manager, or call ``release`` exactly where the instance ends.
    """

    id: str
    path: Path
    _fd: int = attrs.field(repr=False)

    @classmethod
    def acquire(cls, state_dir: Path, kind: str) -> Self:
        """Create and lock a new instance file; ``kind`` says what runs (``serve``,
        ``stdio``, ``bridge``, ``embedded``), for a person reading the directory.

        Raises OSError when the state directory is not writable.
        """
        directory = instances_dir(state_dir)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Locked under a name no claimer looks at, then renamed into place: a starting
        # instance is never seen unlocked, so never taken for a dead one.
        instance_id = new_instance_id()
        path = directory / f"{instance_id}{_SUFFIX}"
        partial = directory / f"{instance_id}{_PARTIAL}"
        fd = os.open(partial, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # nobody else knows the file: at once
            about = {"id": instance_id, "pid": os.getpid(), "kind": kind, "started_at": time.time()}
            os.write(fd, json.dumps(about).encode())
            os.rename(partial, path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                partial.unlink()
            raise
        return cls(instance_id, path, fd)

    @property
    def held(self) -> bool:
        """Whether this object still holds its lock."""
        return self._fd >= 0

    def release(self) -> None:
        """Delete the lock file, then drop the lock (a clean end leaves nothing behind).
        Idempotent."""
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def instance_is_live(state_dir: Path, instance_id: str) -> bool:
    """Whether the instance ``instance_id`` still runs (holds its lock).

    A missing lock file means it ended (cleanly, or it was claimed). A lock file that
    can be locked means its holder died; it is left in place for a claimer.
    """
    if not is_instance_id(instance_id):
        return False
    path = instances_dir(state_dir) / f"{instance_id}{_SUFFIX}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        return not _try_lock(fd)
    finally:
        os.close(fd)  # closing drops a lock we took


def _remove_if_unlocked(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if _try_lock(fd):
            with contextlib.suppress(OSError):
                path.unlink()
    finally:
        os.close(fd)


@attrs.define(eq=False)
class DeadInstance:
    """A dead instance this process has claimed: its lock is held by us until
    :meth:`done` deletes the file, or until the claim ends without it (a later
    instance then tries again)."""

    id: str
    path: Path
    _fd: int = attrs.field(repr=False)

    def done(self) -> None:
        """Everything it left was recovered: delete its lock file and let go."""
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        self._let_go()

    def _let_go(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@contextlib.contextmanager
def claim_dead_instances(state_dir: Path) -> Iterator[list[DeadInstance]]:
    """Claim every dead instance of ``state_dir`` for the duration of the block.

    Yields the claimed instances (their locks held by us, so a concurrent starter
    sees them as live and keeps off). Call ``done()`` on each one whose leftovers
    were recovered; the rest are released untouched when the block ends. Lock files
    with a name this module did not make are ignored.
    """
    directory = instances_dir(state_dir)
    claimed: list[DeadInstance] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        names = []
    try:
        for name in names:
            if name.endswith(_PARTIAL):
                _remove_if_unlocked(directory / name)  # an instance that died starting
                continue
            if not name.endswith(_SUFFIX) or not is_instance_id(name[: -len(_SUFFIX)]):
                continue
            path = directory / name
            try:
                fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:  # released or claimed meanwhile
                continue
            if not _try_lock(fd):
                os.close(fd)
                continue
            # Locked by us now; but a claimer that finished between our listdir and
            # open has deleted it: then it is nobody's to claim.
            if not path.exists():
                os.close(fd)
                continue
            claimed.append(DeadInstance(name[: -len(_SUFFIX)], path, fd))
        yield claimed
    finally:
        for dead in claimed:
            dead._let_go()
