"""How many spares a warm server wants now: its ``warm``, or more after a burst of opens.

Why: ``warm: 2`` serves two sessions at once from spares; the third of a burst of
sixteen waits for a process to start (a Python server spends most of its first second
importing). So the pool remembers the opens of the last ``DEMAND_WINDOW_S`` and keeps as
many spares as the largest burst among them (the most opens within any ``BURST_S``),
never fewer than ``warm`` and never more than ``MAX_SPARES`` (16, the most ``warm`` may
say; a process cap such as ``bridge.max_processes`` bounds them further, as it bounds
every spare). A minute without such a burst brings the count back to ``warm``.

Refills wait for a burst to pass: spawning sixteen interpreters while the burst's own
sessions run their ``initialize`` on two cores slows the very sessions they are for. A
refill starts once no open came for ``REFILL_QUIET_S``, or ``REFILL_MAX_WAIT_S`` after
the first open it replaces, whichever is sooner (a steady stream of opens is refilled
all the same).

Pure bookkeeping on the caller's clock (``trio.current_time()`` in the pool), so it is
tested without processes or time passing.
"""

from __future__ import annotations

import collections
import math

import attrs

MAX_SPARES = 16
"""The most spares one server keeps, whatever its bursts (``warm``'s own bound)."""
DEMAND_WINDOW_S = 60.0
"""How long an open counts toward the demand."""
BURST_S = 1.0
"""Opens this close together are one burst."""
REFILL_QUIET_S = 0.1
REFILL_MAX_WAIT_S = 0.5
_REMEMBERED = 1024  # opens kept at most (a flood of opens needs no more to say "16")


@attrs.define(eq=False)
class Demand:
    """The recent opens of one warm server (``took``), and what they ask of the pool."""

    warm: int
    opens: collections.deque[float] = attrs.field(factory=lambda: collections.deque(maxlen=_REMEMBERED))
    first_unfilled: float | None = None
    """When the first open not yet refilled came (None: every open is refilled)."""

    def took(self, now: float) -> None:
        """A session opened the server (whether or not a spare was waiting for it)."""
        self.opens.append(now)
        if self.first_unfilled is None:
            self.first_unfilled = now

    def wanted(self, now: float) -> int:
        """The spares to keep now: ``warm``, or the largest recent burst (≤ ``MAX_SPARES``)."""
        while self.opens and self.opens[0] <= now - DEMAND_WINDOW_S:
            self.opens.popleft()
        return min(MAX_SPARES, max(self.warm, largest_burst(self.opens)))

    def refill_at(self) -> float:
        """When the pool may spawn the spares the opens took (-inf: at once)."""
        if self.first_unfilled is None or not self.opens:
            return -math.inf
        return min(self.opens[-1] + REFILL_QUIET_S, self.first_unfilled + REFILL_MAX_WAIT_S)

    def refilled(self) -> None:
        """The pool holds what it wants again."""
        self.first_unfilled = None

    def next_change(self) -> float:
        """When ``wanted`` may fall next (the oldest open leaves the window; inf: never)."""
        return self.opens[0] + DEMAND_WINDOW_S if self.opens else math.inf


def largest_burst(opens: collections.deque[float]) -> int:
    """The most opens within any ``BURST_S`` (``opens`` in order)."""
    times = list(opens)
    best = start = 0
    for end, at in enumerate(times):
        while times[start] <= at - BURST_S:
            start += 1
        best = max(best, end - start + 1)
    return best
