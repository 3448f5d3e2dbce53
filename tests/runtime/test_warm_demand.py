"""``Demand``: how many spares a warm server wants after the opens it saw (pure, no processes)."""

from __future__ import annotations

import math

from supervisor.runtime.warm_demand import (
    BURST_S,
    DEMAND_WINDOW_S,
    MAX_SPARES,
    REFILL_MAX_WAIT_S,
    REFILL_QUIET_S,
    Demand,
)


def opened(demand: Demand, *at: float) -> Demand:
    for now in at:
        demand.took(now)
    return demand


def test_without_opens_the_pool_keeps_warm() -> None:
    demand = Demand(2)
    assert demand.wanted(0.0) == 2
    assert demand.refill_at() == -math.inf and demand.next_change() == math.inf


def test_a_burst_raises_the_spares_to_its_size_for_a_minute() -> None:
    demand = opened(Demand(2), *(10.0 + i * 0.01 for i in range(7)))
    assert demand.wanted(11.0) == 7
    assert demand.wanted(10.0 + DEMAND_WINDOW_S - 0.01) == 7  # the first opens still count
    assert demand.next_change() == 10.0 + DEMAND_WINDOW_S
    assert demand.wanted(10.1 + DEMAND_WINDOW_S) == 2  # the burst has left the window


def test_opens_spread_out_are_no_burst() -> None:
    demand = opened(Demand(1), *(i * (BURST_S + 0.1) for i in range(20)))
    assert demand.wanted(25.0) == 1
    # Two within a second are a burst of two.
    assert opened(demand, 25.0, 25.0 + BURST_S / 2).wanted(26.0) == 2


def test_the_largest_burst_of_the_window_counts_and_sixteen_is_the_most() -> None:
    demand = opened(Demand(1), *(i * 0.001 for i in range(40)), *(30.0 + i * 0.01 for i in range(5)))
    assert demand.wanted(31.0) == MAX_SPARES
    assert demand.wanted(0.039 + DEMAND_WINDOW_S + 0.001) == 5  # the big burst left, the small one stays


def test_a_refill_waits_for_the_burst_to_pass_but_not_forever() -> None:
    demand = opened(Demand(2), 5.0)
    assert demand.refill_at() == 5.0 + REFILL_QUIET_S
    opened(demand, 5.05)
    assert demand.refill_at() == 5.05 + REFILL_QUIET_S
    # A steady stream of opens: refilled REFILL_MAX_WAIT_S after the first all the same.
    opened(demand, *(5.1 + i * 0.05 for i in range(20)))
    assert demand.refill_at() == 5.0 + REFILL_MAX_WAIT_S
    demand.refilled()
    assert demand.refill_at() == -math.inf
    opened(demand, 7.0)  # the next open starts a new wait
    assert demand.refill_at() == 7.0 + REFILL_QUIET_S
