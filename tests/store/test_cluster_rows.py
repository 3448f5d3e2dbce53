"""The replicas' tables on both backends: heartbeats that expire by the database's
clock, and sessions that only their holder writes and one taker takes."""

from __future__ import annotations

import time
from collections.abc import Callable

from supervisor.store import Store


def test_a_heartbeat_is_alive_until_its_ttl_runs_out(store: Store) -> None:
    store.beat("r1", "r1:a", address="http://127.0.0.1:1", state="serving", ttl_s=0.3, sessions=2)
    (row,) = store.replicas()
    assert (row.id, row.incarnation, row.alive, row.sessions) == ("r1", "r1:a", True, 2)
    again = store.replica_run("r1:a")
    assert again is not None and (again.id, again.alive) == ("r1", True)
    time.sleep(0.35)
    expired = store.replica_run("r1:a")
    assert expired is not None and not expired.alive and expired.age_s >= 0.3
    # a new run under the same id replaces the row: the old run is no longer known
    store.beat("r1", "r1:b", address=None, state="serving", ttl_s=5)
    assert store.replica_run("r1:a") is None
    assert [(r.incarnation, r.alive) for r in store.replicas()] == [("r1:b", True)]
    store.forget_replica("r1:a")  # an old run's goodbye leaves the new row
    assert len(store.replicas()) == 1
    store.forget_replica("r1:b")
    assert store.replicas() == []


def test_only_the_holder_writes_a_session_and_one_taker_takes_it(reopen: Callable[[], Store]) -> None:
    with reopen() as one, reopen() as two:
        assert one.save_session("s1", "t", None, "r1:a", '{"v": 1}', 1.0)
        assert two.session_row("s1") is not None
        # the holder's run is gone: two takers race, one wins
        assert two.take_session("s1", "r2:a", "r1:a")
        assert not one.take_session("s1", "r3:a", "r1:a")
        # the old holder's late write is refused, the new holder's lands
        assert not one.save_session("s1", "t", None, "r1:a", '{"v": 2}', 1.0)
        assert two.save_session("s1", "t", None, "r2:a", '{"v": 3}', 1.0)
        row = one.session_row("s1")
        assert row is not None and (row.owner, row.state) == ("r2:a", '{"v": 3}')
        # a drain hands sessions over; a taker then takes one that has no holder
        assert two.hand_over_sessions("r2:a") == 1
        assert one.take_session("s1", "r1:b", None)
        one.end_session("s1", "r2:a")  # not its holder any more: the row stays
        assert two.session_row("s1") is not None
        one.end_session("s1", "r1:b")
        assert two.session_row("s1") is None
