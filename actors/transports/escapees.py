"""Processes that escape a server's process group, and how they are found (Linux).

A local server runs in a process group of its own, and teardown kills that group. A
server may still leave processes outside it: a daemon that called ``setsid()``, the
survivor of a double fork. Three things catch those:

- **The marker.** Every server's environment carries
  ``MCP_SUPERVISOR_SERVER=<instance>:<server>``; its descendants inherit it (unless
  they clear their environment). The instance id is unique (see ``instances.py``), so a
  process with the marker of one of our instances is ours, wherever it went.
- **Child subreaper.** A process that set ``PR_SET_CHILD_SUBREAPER`` becomes the parent
  of its descendants' orphans instead of init. ``serve`` and ``stdio`` do (an embedding
  host opts in: the setting is process-wide). At a server's teardown,
  :func:`reap_escapees` kills and reaps our children that belong to it: its marker, or
  its session (the server leads one: ``start_new_session``; a session id is never
  reused while a member lives). Only those pids are waited for, never
  ``waitpid(-1)``: other code (trio, the host) waits for children of its own. A killed
  escapee's own children become ours in turn, so this repeats, within a bound.
- **Sweeps by marker** (:func:`kill_marked`): when a supervisor closes, whatever still
  carries its instance's marker (escapees of an instance that is no subreaper); and at
  start, whatever carries the marker of a dead instance the start has claimed (the
  escapees of a killed supervisor, which were reparented past it).

Elsewhere (macOS, BSD) there is no subreaper and no readable environment of other
processes: escapees outside the group are beyond reach there.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import sys
from collections.abc import Collection, Iterable

import trio

from actors.log_events import get_logger
from actors.transports.pidfiles import read_proc_stat

_log = get_logger("actors.transports.stdio")

MARKER_ENV = "MCP_SUPERVISOR_SERVER"
_MARKER_PREFIX = MARKER_ENV.encode() + b"="

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37

# Teardown waits at most this long for escapees to die after SIGKILL.
REAP_ESCAPEES_S = 1.0
_POLL_S = 0.01


def server_marker(instance: str, server: str) -> str:
    """The marker value of ``server`` run by ``instance``."""
    return f"{instance}:{server}"


# ------------------------------------------------------------------------- prctl

_libc: ctypes.CDLL | None = None


def _prctl(option: int, arg: int | ctypes.c_void_p) -> int:
    """``prctl(2)``; raises OSError. Linux only."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return 0


LINUX = sys.platform.startswith("linux")


def is_subreaper() -> bool:
    """Whether this process adopts its descendants' orphans."""
    if not LINUX:
        return False
    flag = ctypes.c_int(0)
    try:
        _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.cast(ctypes.byref(flag), ctypes.c_void_p))
    except OSError:
        return False
    return flag.value != 0


_subreaper_users = 0
_subreaper_before = False


def acquire_subreaper() -> bool:
    """Make this process a child subreaper (counted: the last release restores what was
    there before). False where that is not possible (not Linux, or refused)."""
    global _subreaper_users, _subreaper_before
    if not LINUX:
        return False
    if _subreaper_users == 0:
        _subreaper_before = is_subreaper()
        try:
            _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        except OSError as exc:
            _log.warning(
                "cannot become a child subreaper (%s); escaped server processes are killed "
                "only when the supervisor closes",
                exc,
            )
            return False
    _subreaper_users += 1
    return True


def release_subreaper() -> None:
    global _subreaper_users
    if _subreaper_users == 0:
        return
    _subreaper_users -= 1
    if _subreaper_users == 0 and not _subreaper_before:
        with contextlib.suppress(OSError):
            _prctl(_PR_SET_CHILD_SUBREAPER, 0)


# ------------------------------------------------------------------------ /proc


def read_marker(pid: int) -> str | None:
    """The marker in ``pid``'s environment; None without one, or when unreadable (another
    user's process, a zombie, gone)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(_MARKER_PREFIX):
            return entry[len(_MARKER_PREFIX) :].decode("utf-8", "replace")
    return None


def children(pid: int) -> list[int]:
    """The children of ``pid`` (every thread's), from ``/proc``."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.extend(int(child) for child in f.read().split())
        except FileNotFoundError:
            if os.path.exists(f"/proc/{pid}/task/{tid}"):  # a kernel without the file
                return [c for c in _all_pids() if _parent(c) == pid]
    return found


def _parent(pid: int) -> int | None:
    stat = read_proc_stat(pid)
    return None if stat is None else stat.ppid


def _all_pids() -> Iterable[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


# ------------------------------------------------------------------ teardown


async def reap_escapees(server_pid: int, marker: str | None, spare: Collection[int]) -> list[int]:
    """Kill and reap our children that belong to the server ``server_pid``: its session
    or its ``marker`` (None: not by marker, e.g. another live server shares it). Never
    touches ``spare`` (our live servers). Only useful in a child subreaper; shielded,
    within ``REAP_ESCAPEES_S``. Returns the pids reaped."""
    me = os.getpid()
    reaped: list[int] = []
    with trio.CancelScope(shield=True), trio.move_on_after(REAP_ESCAPEES_S) as bound:
        while True:
            found = [
                pid
                for pid in children(me)
                if pid not in spare
                and (stat := read_proc_stat(pid)) is not None
                and (stat.session == server_pid or (marker is not None and read_marker(pid) == marker))
            ]
            if not found:
                break
            for pid in found:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)  # our child: its pid is not reused before we reap it
            for pid in found:
                if await _reap(pid):
                    reaped.append(pid)
    if reaped:
        _log.info(
            "killed escaped server processes",
            extra={"fields": {"marker": marker or "", "pids": ",".join(map(str, reaped))}},
        )
    if bound.cancelled_caught:
        _log.error("escaped processes of server pid %d did not die within %g s", server_pid, REAP_ESCAPEES_S)
    return reaped


async def _reap(pid: int) -> bool:
    """Wait for our child ``pid`` to die and collect it; False if it is not ours."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd here (or gone): poll
        while (collected := _collect(pid)) is None:  # noqa: ASYNC110 - nothing to wait on
            await trio.sleep(_POLL_S)
        return collected
    try:
        await trio.lowlevel.wait_readable(pidfd)  # readable: it has died
    finally:
        trio.lowlevel.notify_closing(pidfd)
        os.close(pidfd)
    return _collect(pid) is True


def _collect(pid: int) -> bool | None:
    """Reap ``pid`` if it has died (never waits): True; None while it lives; False if it
    is no child of ours."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return True if done else None


# --------------------------------------------------------------------- sweeps


def kill_marked(instances: Collection[str]) -> list[int]:
    """SIGKILL every process (of ours to signal) whose marker names one of ``instances``;
    return their pids. One scan of ``/proc`` (about 1 ms per 100 processes), synchronous.

    Between reading a process's environment and the kill, it could die and its pid go
    to another process: a window of microseconds, the same as any pid-based kill (the
    teardown sweep has none: it kills children of ours, whose pids wait for our reap).
    """
    if not instances or not LINUX:
        return []
    me = os.getpid()
    killed: list[int] = []
    for pid in _all_pids():
        if pid == me or (read_marker(pid) or "").partition(":")[0] not in instances:
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError as exc:
            if exc.errno != errno.ESRCH:
                _log.warning("cannot kill escaped server process %d: %s", pid, exc)
            continue
        killed.append(pid)
    return killed


async def sweep_instance(instance: str) -> list[int]:
    """When a supervisor closes: kill what still carries its marker (servers' escapees no
    teardown caught), and reap those that are our children. Shielded and quick."""
    with trio.CancelScope(shield=True):
        killed = await trio.to_thread.run_sync(kill_marked, {instance})
        with trio.move_on_after(REAP_ESCAPEES_S):
            for pid in killed:
                await _reap(pid)  # not ours (init's, another subreaper's): returns at once
    return killed
