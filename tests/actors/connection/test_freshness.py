"""The pure rules of ``actors/connection/freshness.py``: when a listing goes stale."""

from __future__ import annotations

from typing import Any

import pytest

from actors.connection.freshness import MAX_REFETCH_S, MIN_REFETCH_S, list_ttl_ms, refetch_after


@pytest.mark.parametrize(
    ("ttls", "after"),
    [
        ([], None),
        ([0], None),
        ([30_000, 0], None),
        ([30_000], 30.0),
        ([50], MIN_REFETCH_S),
        ([10**12], MAX_REFETCH_S),
        ([60_000, 20_000], 20.0),
    ],
)
def test_refetch_after(ttls: list[int], after: float | None) -> None:
    assert refetch_after(ttls) == after


@pytest.mark.parametrize(
    ("result", "ttl"),
    [
        ({"tools": []}, None),
        ({"ttlMs": 1500}, 1500),
        ({"ttlMs": 1500.7}, 1500),
        ({"ttlMs": 0}, 0),
        ({"ttlMs": -1}, None),
        ({"ttlMs": True}, None),
        ({"ttlMs": "60000"}, None),
        ({"ttlMs": float("inf")}, None),
        ({"ttlMs": float("nan")}, None),
    ],
)
def test_list_ttl_ms(result: dict[str, Any], ttl: int | None) -> None:
    assert list_ttl_ms(result) == ttl
