"""The bridge comparison's report (``bench_bridge.py --only peer``, ``run.py``'s
bridge section): a ``tools/call`` round trip and session opens of ours against
supergateway's WebSocket mode, medians (min-max) of interleaved rounds, ratios
against ours, and ours before / after when a baseline ran too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tables import Column, before_after, table

COLUMNS: list[Column] = [
    ("round_trip_us.p50", "round trip p50 µs", "{:.0f}"),
    ("round_trip_us.p99", "round trip p99 µs", "{:.0f}"),
    ("gateway_cpu_us_per_call", "gateway CPU µs/call", "{:.0f}"),
    ("opens_1.opens_per_s", "session opens/s, 1 at a time", "{:.1f}"),
    ("opens_16.opens_per_s", "session opens/s, 16 at a time", "{:.1f}"),
]
WARM_COLUMNS: list[Column] = [
    ("opens_warm_1.opens_per_s", "opens/s on mini-warm, 1 at a time", "{:.1f}"),
    ("opens_warm_16.opens_per_s", "opens/s on mini-warm, 16 at a time", "{:.1f}"),
    ("opens_burst_16.opens_per_s", "opens/s on mini-warm, a burst of 16 after one", "{:.1f}"),
    ("socket_only.per_s", "our socket alone (no session) per s", "{:.1f}"),
]
FLOOR_COLUMNS: list[Column] = [
    ("us.p50", "round trip p50 µs", "{:.0f}"),
    ("us.p99", "round trip p99 µs", "{:.0f}"),
]
RATIOS = [("round_trip_us.p50", "p50"), ("opens_16.opens_per_s", "opens/s, 16")]


def bridge_table(name: str, section: Mapping[str, Any], before: str = "ours-before") -> list[str]:
    """Every contender's row with ratios to ours; ours-before against ours if it ran."""
    warm = any(
        "opens_warm_1.opens_per_s" in c.get("metrics", {}) for c in section.get("contenders", {}).values()
    )
    lines = table(name, section, [*COLUMNS, *(WARM_COLUMNS if warm else [])], "ours", RATIOS)
    found = before_after(name, section, COLUMNS, before, "ours")
    return lines + (["", *found] if found else [])


def floor_table(name: str, section: Mapping[str, Any]) -> list[str]:
    """The bare WebSocket echoes, against the Quart stack ``serve`` used to run."""
    return table(name, section, FLOOR_COLUMNS, "echo-quart", [("us.p50", "p50")])
