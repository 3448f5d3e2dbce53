"""The console benchmark's bookkeeping (``benchmarks/bench_console.py``): an event it
published and never saw counts as lost, and its events alternate between the two
kinds the page applies, each under a key the page's observer notes. No event is
measured."""

from __future__ import annotations

import math
import sys

from tests.support.paths import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import bench_console


def test_an_event_never_seen_is_lost_and_lags_are_of_the_seen_ones() -> None:
    sent = {"s0": 10.0, "a1": 10.02, "s2": 10.04}
    lags = bench_console._lags(sent, {"s0": 10.001, "s2": 10.054}, "page")
    assert lags["page_lost"] == 1
    assert math.isclose(lags["page_p50_ms"], 7.5, abs_tol=1e-6)  # the median of the seen: 1 and 14 ms
    assert bench_console._lags(sent, {}, "relay")["relay_lost"] == 3


def test_events_alternate_state_and_pending_approval_keyed_as_the_page_notes_them() -> None:
    (k0, e0), (k1, e1) = bench_console._event(0), bench_console._event(1)
    assert (k0, e0["type"], e0["server"], e0["next_retry_in_s"]) == ("s0", "state", "bench", 0)
    assert (k1, e1["type"], e1["status"], e1["id"]) == ("a1", "approval", "pending", "a1")
    assert e1["tenant"] == "ops"  # the operator's stream carries it
