"""``bridge.max_processes``: the bridge's processes, counted in one place.

Two parts of the service start bridged processes: the bridge hub (a process per
session) and the warm pool (the spares of ``bridge: true`` servers, counted from their
spawn until they are reaped). One cap bounds both, and ``ProcessCap`` is its one
owner: the pool holds it (the spares are its own) and asks it before it spawns a
bridged spare; the hub reports each session's process as it comes and goes and asks
it before it opens a session. Nobody sets a callback on anybody.

Until a hub counts under it (``open``), no bridged spare is spawned: a cap that
nobody checks yet is no room to fill (``Supervisor.open`` without ``serve``).
"""

from __future__ import annotations

from collections.abc import Callable

from actors.spec import ServerSpec


def counts_toward_cap(spec: ServerSpec) -> bool:
    """Whether a server's processes count toward ``bridge.max_processes``."""
    return spec.bridge


class ProcessCap:
    """The cap, over ``limit()`` (the running config's) and ``spares()`` (the warm
    bridged spares alive, the pool's count)."""

    def __init__(self, limit: Callable[[], int], spares: Callable[[], int]) -> None:
        self._limit = limit
        self._spares = spares
        self.sessions = 0
        """Bridge sessions whose process is counted (the hub's reports)."""
        self.counting = False
        """Whether a hub counts sessions under the cap (bridged spares wait until then)."""

    def open(self) -> None:
        """A hub counts under the cap from now on: bridged spares may fill what its
        sessions leave."""
        self.counting = True

    @property
    def limit(self) -> int:
        return self._limit()

    @property
    def processes(self) -> int:
        """Bridged processes alive or being torn down: sessions' and warm spares'."""
        return self.sessions + self._spares()

    @property
    def full(self) -> bool:
        return self.processes >= self._limit()

    def room_for_spare(self) -> bool:
        """Whether one more bridged spare fits (sessions come first: they may evict one)."""
        return self.counting and not self.full

    def session_started(self) -> None:
        self.sessions += 1

    def session_ended(self) -> None:
        self.sessions -= 1
