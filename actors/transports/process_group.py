"""A stdio server's process group: how it is stopped, and which groups this process made.

Split from ``stdio.py`` so the transport reads as I/O on three pipes while the hard
part of a local server, making sure nothing it started outlives it, reads on its own:

- :class:`ProcessGroup` stops one server: close stdin, grace, SIGTERM the group,
  grace, SIGKILL the group, reap the leader, SIGKILL the group once more for members
  that outlived it; shielded and under its own deadline.
- The registry knows the groups spawned recently (tests diff it to find leaks), the
  servers not yet reaped, and how many live servers (counted from before their spawn)
  share each escapee marker, so a sweep for escapees (``escapees.py``) never takes a
  live server, one still being spawned, nor another live server's escapees.
"""

from __future__ import annotations

import collections
import os
import signal

import trio

from actors.log_events import get_logger
from actors.transports.escapees import is_subreaper, reap_escapees

_log = get_logger("actors.transports.stdio")

# After SIGKILL a process dies at once unless stuck in the kernel (D state).
KILL_REAP_S = 5.0

# Process groups created here, newest last. Bounded: a long-lived supervisor restarts
# servers for months. Tests diff it around each test to find leaked groups.
_recent_groups: collections.deque[int] = collections.deque(maxlen=1024)
# Our servers not yet reaped, and how many live servers carry each marker: a sweep for
# escapees must never take a live server, nor the escapees of another live server with
# the same marker (session-scoped servers share a name).
_unreaped: set[int] = set()
_live_markers: collections.Counter[str] = collections.Counter()


def spawned_process_groups() -> tuple[int, ...]:
    """Process groups this module spawned recently (oldest first), for leak checks."""
    return tuple(_recent_groups)


def expect(marker: str) -> None:
    """Count a server of ``marker`` live from before its spawn: the spawn runs in a
    thread, and the new process is our child before :func:`adopt` can spare it; a
    teardown sweeping ``marker`` meanwhile would take it for its own escapee. Each
    call is matched by one :func:`release` (or :func:`unexpect` if the spawn failed)."""
    _live_markers[marker] += 1


def unexpect(marker: str) -> None:
    """Count out a server whose spawn failed (or a released one)."""
    _live_markers[marker] -= 1
    if not _live_markers[marker]:
        del _live_markers[marker]


def adopt(process: trio.Process) -> None:
    """Spare a just-spawned server from sweeps (call with no checkpoint since the spawn)."""
    _recent_groups.append(process.pid)
    _unreaped.add(process.pid)


def release(process: trio.Process, marker: str) -> None:
    """Count a stopped server out (its group was stopped, reaped if it could be)."""
    if process.returncode is not None:
        _unreaped.discard(process.pid)
    unexpect(marker)


async def reap_escapees_of(process: trio.Process, marker: str) -> None:
    """In a child subreaper: kill and reap what the server left outside its group."""
    if process.returncode is not None:
        _unreaped.discard(process.pid)
    if is_subreaper():
        shared = _live_markers[marker] > 1  # then its escapees cannot be told from the other's
        await reap_escapees(process.pid, None if shared else marker, _unreaped)


class ProcessGroup:
    """The server's process group: signals, reaping, and the last SIGKILL.

    Once the leader is reaped and the leftovers SIGKILLed, the group id is never
    signalled again: when the group empties, the kernel may hand the number to a
    stranger.
    """

    __slots__ = ("_finished", "_stopped", "name", "pgid", "process")

    def __init__(self, process: trio.Process, name: str) -> None:
        self.process = process
        self.pgid = process.pid  # start_new_session=True: the leader's pid is the group id
        self.name = name
        self._finished = False
        self._stopped = False

    def signal(self, sig: int) -> None:
        if self._finished:
            return
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:  # cannot happen while the group is ours; log, not crash
            _log.warning("mcp server %s: not allowed to signal group %d", self.name, self.pgid)

    def _leader_reaped(self) -> None:
        # Called with no checkpoint since the reap. Members that outlived the leader
        # (grandchildren) would keep the pipes open and live on as orphans.
        self.signal(signal.SIGKILL)
        self._finished = True

    async def _exited_within(self, seconds: float) -> bool:
        with trio.move_on_after(max(seconds, 0.0)):
            await self.process.wait()
            self._leader_reaped()
        return self.process.returncode is not None

    def exited(self) -> None:
        """Hub callback: a leader that exits by itself takes its group along, so the
        reader sees EOF even when a grandchild held stdout open."""
        self._leader_reaped()

    async def stop(self, grace_s: float) -> None:
        """Close stdin, grace, SIGTERM, grace, SIGKILL, reap, SIGKILL leftovers.

        Shielded with its own deadline, so it finishes even when the caller is
        cancelled. Calling it again costs nothing.
        """
        if self._stopped:
            return
        self._stopped = True
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + 2 * max(grace_s, 0.0) + KILL_REAP_S
            if self.process.stdin is not None:
                # EOF on stdin is how an MCP stdio server is asked to leave politely.
                await self.process.stdin.aclose()
            if not await self._exited_within(grace_s):
                self.signal(signal.SIGTERM)
                if not await self._exited_within(grace_s):
                    self.signal(signal.SIGKILL)
                    await self._exited_within(KILL_REAP_S)
        if self.process.returncode is None:
            _log.error(
                "mcp server %s: pid %d survived SIGKILL for %.0f s (stuck in the kernel?); "
                "it will be reaped when it finally exits",
                self.name,
                self.process.pid,
                KILL_REAP_S,
            )


async def close_pipes(process: trio.Process) -> None:
    """Close the server's three pipes, also under cancellation."""
    with trio.CancelScope(shield=True):
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                await stream.aclose()
