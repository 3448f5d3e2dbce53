"""A server's reconnect schedule (``reconnect_schedule_s``) and its jitter (``reconnect_jitter``).

The schedule is the delays before each reconnect attempt, the last repeating; the
jitter the fraction of each delay it may move by, either way, at random, so servers
that fail together do not retry together (``actors/connection/schedule.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.connection.schedule import MAX_JITTER
from actors.spec import DEFAULT_RECONNECT_JITTER, DEFAULT_RECONNECT_SCHEDULE_S

from .values import Invalid, child, expect_list, expect_number, show


def read_schedule(entry: Mapping[str, Any], path: str) -> tuple[float, ...]:
    """The delays, in seconds; the default 1, 2, 5, 15, 60."""
    if "reconnect_schedule_s" not in entry:
        return DEFAULT_RECONNECT_SCHEDULE_S
    where = child(path, "reconnect_schedule_s")
    what = "a non-empty list of delays in seconds, like [1, 2, 5, 15, 60]"
    delays = expect_list(entry["reconnect_schedule_s"], where, what)
    if not delays:
        raise Invalid(where, f"expected {what}, got []")
    return tuple(expect_number(delay, child(where, i), positive=False) for i, delay in enumerate(delays))


def read_jitter(entry: Mapping[str, Any], path: str) -> float:
    """The fraction from 0 (off) to 0.5; the default 0.1."""
    if "reconnect_jitter" not in entry:
        return DEFAULT_RECONNECT_JITTER
    where = child(path, "reconnect_jitter")
    value = entry["reconnect_jitter"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_JITTER:
        raise Invalid(
            where,
            f"expected a fraction from 0 to {MAX_JITTER:g} (0.1: each delay moves by up to a tenth "
            f"of itself; 0: no jitter), got {show(value)}",
        )
    return float(value)
