"""Each server's latency ring (``supervisor/runtime/latency_ring.py``) on an injected
clock: 90 slots of 10 s, p50/p99 from the histogram, a slot reused when its 10 s come
round again, and nothing kept beyond 15 minutes."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

from supervisor.runtime.latency_ring import SLOTS, LatencyBucket, LatencyRings


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_slot_counts_its_calls_and_reads_their_percentiles() -> None:
    clock = Clock()
    rings = LatencyRings(clock)
    for _ in range(98):
        rings.observe("fs", 0.004)  # 4 ms: the 5 ms bucket
    rings.observe("fs", 0.3)
    rings.observe("fs", 3.0)
    buckets = rings.buckets("fs")
    assert len(buckets) == SLOTS
    assert buckets[-1] == LatencyBucket(1_000_000.0, 100, 5, 500)
    assert buckets[0].start == 1_000_000.0 - 10 * (SLOTS - 1)
    assert all(b.count == 0 and b.p50_ms is None for b in buckets[:-1])
    assert [b.count for b in rings.buckets("never-called")] == [0] * SLOTS


def test_old_slots_leave_the_window_and_are_reused() -> None:
    clock = Clock()
    rings = LatencyRings(clock)
    rings.observe("fs", 0.05)
    clock.now += 10
    rings.observe("fs", 200.0)  # beyond the last bound: counted in the last
    assert [b.count for b in rings.buckets("fs")[-2:]] == [1, 1]
    assert rings.buckets("fs")[-1].p99_ms == 300_000
    clock.now += 10 * (SLOTS - 1)  # the first slot's 10 s are 15 minutes ago
    assert sum(b.count for b in rings.buckets("fs")) == 1
    rings.observe("fs", 0.001)  # the reused slot starts empty
    assert rings.buckets("fs")[-1] == LatencyBucket(clock.now, 1, 1, 1)


def _traced_bytes(work: Callable[[], None]) -> int:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        work()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_a_server_holds_a_histogram_only_for_the_periods_that_saw_calls() -> None:
    """Memory: a server called once keeps one histogram, not one per slot (90), and a
    server called for longer than the window keeps the window's histograms only."""
    clock = Clock()
    rings = LatencyRings(clock)
    per_server = _traced_bytes(lambda: [rings.observe(f"s{n}", 0.004) for n in range(100)]) / 100
    assert per_server < 1_000, f"{per_server:.0f} bytes per server called once"
    clock.now += 20  # two periods on: one more histogram, the old one still read
    rings.observe("s0", 0.004)
    assert [b.count for b in rings.buckets("s0")[-3:]] == [1, 0, 1]

    def a_call_every_period_for_an_hour() -> None:
        for _ in range(360):
            clock.now += 10
            rings.observe("busy", 0.004)

    held = _traced_bytes(a_call_every_period_for_an_hour)
    assert held < SLOTS * 400, f"{held} bytes held for 360 periods (the window is {SLOTS})"
    assert sum(b.count for b in rings.buckets("busy")) == SLOTS
