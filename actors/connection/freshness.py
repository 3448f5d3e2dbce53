"""When a tool list goes stale: the ``ttlMs`` of a 2026-07-28 ``tools/list`` result.

In the per-request era a cacheable result says how long it stays fresh (``ttlMs``,
with a ``cacheScope`` that only matters to caches shared between users; ours is one
connection's). When a listing's freshness runs out, the connection lists again in the
background, exactly as after ``notifications/tools/list_changed``; the router makes a
new epoch only if the tools changed. Pure rules; ``live.py`` keeps the timer.

Choices the revision leaves open: a ``ttlMs`` of 0 (or none) schedules nothing (the
result is not meant to be cached, and listing in a loop would only load the server;
the ``subscriptions/listen`` stream still reports changes); a very short one waits at
least :data:`MIN_REFETCH_S`, a huge one at most :data:`MAX_REFETCH_S`. Of a paged
listing the shortest page's ``ttlMs`` counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MIN_REFETCH_S = 1.0
MAX_REFETCH_S = 24 * 3600.0


def list_ttl_ms(result: Mapping[str, Any]) -> int | None:
    """The ``ttlMs`` a result carries, or None when absent or not a count of ms."""
    ttl = result.get("ttlMs")
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 <= ttl < float("inf"):
        return None
    return int(ttl)


def refetch_after(ttls: Sequence[int]) -> float | None:
    """Seconds until a listing whose pages carried ``ttls`` is read again, or None.

    | ttls            | refetch after        |
    |-----------------|----------------------|
    | none            | never                |
    | any is 0        | never                |
    | 30000           | 30 s                 |
    | 50              | 1 s (the floor)      |
    | 10**12          | 24 h (the ceiling)   |
    | 60000, 20000    | 20 s (the shortest)  |
    """
    if not ttls or min(ttls) <= 0:
        return None
    return min(max(min(ttls) / 1000, MIN_REFETCH_S), MAX_REFETCH_S)
