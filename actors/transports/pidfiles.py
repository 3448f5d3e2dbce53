"""Pidfiles, so a crashed supervisor's server processes are cleaned up on the next start.

Every spawned stdio server gets ``<state_dir>/pids/<pid>-<start>.json`` while it lives.
A clean teardown deletes it. After a crash (SIGKILL, OOM, power cut of the host
process) the files remain, and :func:`reap_orphans` kills what they describe.

PIDs get reused, so a pid alone proves nothing. A record also holds the process's start
time (field 22 of ``/proc/<pid>/stat``, in clock ticks since boot): a live process
with the same pid *and* the same start time is the one we spawned, anything else is a
stranger and is never signalled.

Whose servers are orphans? A record names the supervisor *instance* that spawned the
server (``instances.py``: one lock per instance). Several instances share a state
directory (one ``stdio`` per editor window, ``serve``, embeddings), and only a dead
instance's servers are orphans: :func:`reap_orphans` reaps exactly the records of the
dead instances its caller has claimed, and never a record whose instance holds its
lock. The writing process's pid (+ start time) could not tell: an instance in
another pid namespace (a container, a sandboxed editor) has pids that mean nothing
here, so its live servers' records looked orphaned; and an instance may end while its
process lives on (an embedding host that opens a supervisor again after a stuck
shutdown), so a dead instance's servers looked owned. Records written before instances
existed name only that owner process and keep the older check.

Linux only (``/proc``). Everything here is synchronous: ``reap_orphans`` runs once at
start-up and sleeps (bounded, at most about one second) with ``time.sleep``; call it
before the event loop has other work, or through ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Literal

import attrs

from actors.log_events import get_logger
from actors.transports.instances import instance_is_live

_log = get_logger(__name__)

# Hard cap on the time reap_orphans may take: start-up must not stall on old junk.
MAX_REAP_S = 1.0
# Part of it kept for the processes to vanish after SIGKILL.
_KILL_WAIT_S = 0.2
_POLL_S = 0.02


@attrs.frozen(slots=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` this project needs."""

    pid: int
    state: str  # R, S, D, Z (zombie), T, …
    ppid: int
    pgrp: int
    session: int
    start_time: int  # clock ticks after boot; with pid, identifies a process for good


def read_proc_stat(pid: int) -> ProcStat | None:
    """Read ``/proc/<pid>/stat``; ``None`` if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm (field 2) is in parentheses and may itself contain spaces and ')'.
    fields = raw[raw.rindex(b")") + 2 :].split()
    # fields[0] is field 3 (state); field n is fields[n - 3].
    return ProcStat(
        pid=pid,
        state=fields[0].decode("ascii", "replace"),
        ppid=int(fields[1]),
        pgrp=int(fields[2]),
        session=int(fields[3]),
        start_time=int(fields[19]),
    )


@attrs.frozen(slots=True)
class PidRecord:
    """One pidfile's content."""

    pid: int
    pgid: int
    start_time: int
    server: str
    argv0: str
    owner_pid: int
    owner_start_time: int
    instance: str | None = None  # None: written before instances existed


def pids_dir(state_dir: Path) -> Path:
    """Where the pidfiles live."""
    return Path(state_dir) / "pids"


def write_pidfile(
    state_dir: Path,
    *,
    pid: int,
    pgid: int,
    server: str,
    argv0: str,
    instance: str | None = None,
    start_time: int | None = None,
) -> Path:
    """Record a freshly spawned server process; return the pidfile's path.

    ``start_time`` defaults to the one in ``/proc`` (pass it only to test the
    mismatch path). Written atomically (temp file + rename), so a crash mid-write
    leaves no half file behind. Raises OSError if the directory is not writable.
    """
    if start_time is None:
        stat = read_proc_stat(pid)
        if stat is None:
            raise ProcessLookupError(pid)
        start_time = stat.start_time
    owner = read_proc_stat(os.getpid())
    record = PidRecord(
        pid=pid,
        pgid=pgid,
        start_time=start_time,
        server=server,
        argv0=argv0,
        owner_pid=os.getpid(),
        owner_start_time=owner.start_time if owner is not None else 0,
        instance=instance,
    )
    directory = pids_dir(state_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / f"{pid}-{start_time}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(attrs.asdict(record)), encoding="utf-8")
    os.replace(tmp, path)
    return path


def remove_pidfile(path: Path) -> None:
    """Delete a pidfile; a missing one is fine (teardown may run twice)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def read_pidfile(path: Path) -> PidRecord | None:
    """Parse a pidfile; ``None`` if it is unreadable or malformed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return PidRecord(
            pid=int(data["pid"]),
            pgid=int(data["pgid"]),
            start_time=int(data["start_time"]),
            server=str(data["server"]),
            argv0=str(data["argv0"]),
            owner_pid=int(data.get("owner_pid", 0)),
            owner_start_time=int(data.get("owner_start_time", 0)),
            instance=None if data.get("instance") is None else str(data["instance"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def is_same_process(pid: int, start_time: int) -> bool:
    """True if ``pid`` exists (zombies included) and started at ``start_time``."""
    stat = read_proc_stat(pid)
    return stat is not None and stat.start_time == start_time


def is_running(pid: int, start_time: int) -> bool:
    """Like :func:`is_same_process`, but a zombie (dead, not yet reaped) does not count."""
    stat = read_proc_stat(pid)
    return stat is not None and stat.start_time == start_time and stat.state != "Z"


Verdict = Literal["orphan", "stale", "owned"]


def classify(record: PidRecord, state_dir: Path, claimed: Collection[str] = ()) -> Verdict:
    """Decide what a pidfile calls for: ``"orphan"`` (kill its group, then delete),
    ``"stale"`` (process gone or pid reused: just delete) or ``"owned"`` (its
    supervisor instance still runs, or another starter is recovering it: leave it).

    ``claimed``: the dead instances the caller holds (``claim_dead_instances``). A
    record of an instance that is neither claimed nor live (its lock file is gone: it
    ended, or was recovered, and this record is a leftover) is judged by its process.
    """
    if record.instance is not None:
        if record.instance not in claimed and instance_is_live(state_dir, record.instance):
            return "owned"
    elif record.owner_pid > 0 and is_running(record.owner_pid, record.owner_start_time):
        return "owned"
    if record.pid <= 1 or not is_same_process(record.pid, record.start_time):
        return "stale"
    return "orphan"


def _verified_group(record: PidRecord) -> int | None:
    """The orphan's process group if it is provably the one we created, else ``None``.

    Checked once, while the leader (same pid and start time) still holds the group id:
    a group id cannot be reused while any member is left, so the later SIGKILL may
    target it even after the leader is gone.
    """
    stat = read_proc_stat(record.pid)
    if (
        stat is None
        or stat.start_time != record.start_time
        or stat.pgrp != record.pgid
        or record.pgid <= 1
        or record.pgid == os.getpgrp()
    ):
        return None
    return record.pgid


def _signal(record: PidRecord, pgid: int | None, sig: int) -> None:
    """Signal the orphan's verified group, or else only its leader if still the same."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if pgid is not None:
            os.killpg(pgid, sig)
        elif is_same_process(record.pid, record.start_time):
            os.kill(record.pid, sig)


def _wait(condition: Callable[[], bool], deadline: float) -> None:
    while condition() and time.monotonic() < deadline:
        time.sleep(_POLL_S)


def _any_running_member(pgids: set[int]) -> bool:
    """Is any process (zombies aside) still in one of these groups? Scans ``/proc``."""
    if not pgids:
        return False
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_proc_stat(int(entry))
            if stat is not None and stat.pgrp in pgids and stat.state != "Z":
                return True
    return False


def reap_orphans(state_dir: Path, claimed: Collection[str] = (), *, grace_s: float = 0.5) -> list[int]:
    """Kill the process groups dead supervisor instances left behind; return their pids.

    Run it inside ``claim_dead_instances`` and pass the ids it claimed: their servers
    are reaped, a live instance's are never touched (see :func:`classify`).

    SIGTERM to each orphan's group, up to ``grace_s`` (capped at 0.8 s) for the
    leaders to exit, then SIGKILL to each group regardless (members that ignored
    SIGTERM or outlived their leader). Pidfiles of processes that are gone, or whose
    pid now belongs to another process, are only deleted. Takes at most about one
    second.
    """
    directory = pids_dir(state_dir)
    if not directory.is_dir():
        return []
    orphans: list[tuple[Path, PidRecord, int | None]] = []
    for path in sorted(directory.glob("*.json")):
        record = read_pidfile(path)
        if record is None:
            _log.warning("removing unreadable pidfile %s", path)
            remove_pidfile(path)
            continue
        verdict = classify(record, state_dir, claimed)
        if verdict == "orphan":
            orphans.append((path, record, _verified_group(record)))
        elif verdict == "stale":
            remove_pidfile(path)
    for _, record, pgid in orphans:
        _log.warning(
            "killing orphaned mcp server %s (pid %d, %s) left by an earlier run",
            record.server,
            record.pid,
            record.argv0,
        )
        _signal(record, pgid, signal.SIGTERM)
    begin = time.monotonic()
    # Leaders only: a member ignoring SIGTERM is SIGKILLed below anyway.
    _wait(
        lambda: any(is_running(r.pid, r.start_time) for _, r, _ in orphans),
        begin + min(max(grace_s, 0.0), MAX_REAP_S - _KILL_WAIT_S),
    )
    for _, record, pgid in orphans:
        _signal(record, pgid, signal.SIGKILL)
    # SIGKILL is delivered asynchronously: return only once the groups are dead.
    groups = {pgid for _, _, pgid in orphans if pgid is not None}
    _wait(
        lambda: any(is_running(r.pid, r.start_time) for _, r, _ in orphans) or _any_running_member(groups),
        begin + MAX_REAP_S,
    )
    for path, _, _ in orphans:
        remove_pidfile(path)
    return [record.pid for _, record, _ in orphans]
