"""Each server's call latency over the last 15 minutes: a ring of 90 histograms of 10 s
each, for ``GET /v1/servers/{name}/latency`` (the console's plot).

Recording a call is a dict lookup, a bisect and an integer increment: the call path pays
no more. Only the last 90 periods are kept, so the ring never grows.
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


Ring = dict[int, list[int]]
"""One server's histograms by 10 s period, only for periods that saw a call (at most
``SLOTS``: older ones are dropped when a new period begins). A dict, not 90 slots made
up front: a server called once holds one histogram, about 0.5 KB, where the ring of
slots held 18 KB (``bench_memory.py``)."""


class LatencyRings:
    """A ring per server, fed with each call's seconds with its server."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._rings: dict[str, Ring] = {}

    def observe(self, server: str, seconds: float) -> None:
        """Count one call of ``server`` that ended now."""
        ring = self._rings.get(server)
        if ring is None:
            ring = self._rings[server] = {}
        period = int(self._clock() // SLOT_S)
        counts = ring.get(period)
        if counts is None:  # once per server and 10 s
            for old in [p for p in ring if p <= period - SLOTS]:
                del ring[old]
            counts = ring[period] = [0] * _BUCKETS
        counts[bisect.bisect_left(BOUNDS_MS, seconds * 1000)] += 1

    def buckets(self, server: str) -> list[LatencyBucket]:
        """The last 90 slots of ``server``, oldest first (empty ones too)."""
        ring = self._rings.get(server, {})
        now = int(self._clock() // SLOT_S)
        return [_bucket(period, ring.get(period)) for period in range(now - SLOTS + 1, now + 1)]


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
