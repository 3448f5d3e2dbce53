"""A server's ``warm``: how many spare processes the warm pool keeps (``supervisor/runtime/warm_pool.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .values import Invalid, child, expect_int

MAX_WARM = 16
"""The most spare processes one server may keep: each is a live, idle process."""


def read_warm(entry: Mapping[str, Any], per_session: bool, path: str) -> int:
    """How many spares to keep: only a server that starts a process per session has use for them."""
    if "warm" not in entry:
        return 0
    where = child(path, "warm")
    warm = expect_int(entry["warm"], where, minimum=0)
    if warm > MAX_WARM:
        raise Invalid(where, f"expected at most {MAX_WARM} spare processes, got {warm}; lower 'warm'")
    if warm and not per_session:
        raise Invalid(
            where,
            "spare processes serve servers that start one process per session: set "
            '"scope": "session" (or "bridge": true), or remove \'warm\'',
        )
    return warm
