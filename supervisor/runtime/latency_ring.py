"""Each server's call latency over the last 15 minutes: a ring of 90 histograms of 10 s
each, for ``GET /v1/servers/{name}/latency`` (the console's plot).

Recording a call is a bucket index, a bisect and two integer increments: the call path
pays no more. A slot is reused when its 10 s come round again, so the ring never grows.
Percentiles are read from the histogram's bounds (the upper bound of the bucket the rank
falls in), which is as precise as a plot needs.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable

import attrs

SLOT_S = 10
SLOTS = 90  # 15 minutes
BOUNDS_MS: tuple[float, ...] = (
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000,
)  # fmt: skip
"""Upper bounds of the histogram's buckets (ms); one more bucket holds the rest."""
_BUCKETS = len(BOUNDS_MS) + 1


@attrs.frozen(slots=True)
class LatencyBucket:
    """One 10 s slot of one server: its start (unix time), count, p50 and p99
    (ms; None when empty)."""

    start: float
    count: int
    p50_ms: float | None
    p99_ms: float | None


class _Ring:
    """A slot's histogram is made when its period first sees a call (a new list each
    period, not one cleared), so a server called once holds one histogram, not 90: about
    1.7 KB instead of 18 KB per server (``bench_memory.py``)."""

    def __init__(self) -> None:
        self.stamps = [-1] * SLOTS  # which 10 s period each slot holds
        self.counts: list[list[int] | None] = [None] * SLOTS


class LatencyRings:
    """A ring per server, fed with each call's seconds with its server."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._rings: dict[str, _Ring] = {}

    def observe(self, server: str, seconds: float) -> None:
        """Count one call of ``server`` that ended now."""
        ring = self._rings.get(server)
        if ring is None:
            ring = self._rings[server] = _Ring()
        period = int(self._clock() // SLOT_S)
        slot = period % SLOTS
        counts = ring.counts[slot]
        if counts is None or ring.stamps[slot] != period:
            ring.stamps[slot] = period
            counts = ring.counts[slot] = [0] * _BUCKETS
        counts[bisect.bisect_left(BOUNDS_MS, seconds * 1000)] += 1

    def buckets(self, server: str) -> list[LatencyBucket]:
        """The last 90 slots of ``server``, oldest first (empty ones too)."""
        ring = self._rings.get(server)
        now = int(self._clock() // SLOT_S)
        out = []
        for period in range(now - SLOTS + 1, now + 1):
            slot = period % SLOTS
            held = ring is not None and ring.stamps[slot] == period
            counts = ring.counts[slot] if ring is not None and held else None
            out.append(_bucket(period, counts))
        return out


def _bucket(period: int, counts: list[int] | None) -> LatencyBucket:
    total = sum(counts) if counts is not None else 0
    if counts is None or total == 0:
        return LatencyBucket(float(period * SLOT_S), 0, None, None)
    return LatencyBucket(
        float(period * SLOT_S), total, _quantile(counts, total, 0.5), _quantile(counts, total, 0.99)
    )


def _quantile(counts: list[int], total: int, q: float) -> float:
    """The upper bound of the bucket that holds the ``q`` quantile (the last bound for
    calls over every bound)."""
    rank, seen = q * total, 0
    for index, count in enumerate(counts):
        seen += count
        if seen >= rank:
            return BOUNDS_MS[min(index, len(BOUNDS_MS) - 1)]
    return BOUNDS_MS[-1]
