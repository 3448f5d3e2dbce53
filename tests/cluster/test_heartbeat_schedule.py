"""The heartbeat's schedule, on a mock clock with an in-memory store: a beat every
``heartbeat_s``, at once on ``drain``; a failed beat warns once per outage and keeps
trying; ``fresh`` and readiness follow the TTL; a config that differs is warned about
once per (replica, digest); the row goes at a clean stop."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing

from actors.broadcast import Broadcast
from supervisor.cluster.heartbeats import Heartbeats, heartbeats_running
from supervisor.cluster.replica import ReplicaIdentity
from supervisor.settings.model import ClusterSettings
from supervisor.store.cluster_rows import ReplicaRow
from supervisor.store.errors import DatabaseError

CLUSTER = ClusterSettings("r1", (b"k" * 32,), heartbeat_s=0.25, ttl_s=1.0)
ME = ReplicaIdentity("r1", "r1:aaaa", CLUSTER)


class MemoryRows:
    """The replicas table in memory (the clock: trio's); ``down`` makes every call fail."""

    def __init__(self) -> None:
        self.rows: dict[str, ReplicaRow] = {}
        self.beats: list[tuple[float, str]] = []
        self.down = False
        self.closed = 0

    def _check(self) -> None:
        if self.down:
            raise DatabaseError("connection refused", failed=True)

    def beat(self, replica: str, incarnation: str, **row: Any) -> None:
        self._check()
        now = trio.current_time()
        self.beats.append((now, row["state"]))
        self.rows[replica] = ReplicaRow(
            replica, incarnation, row["address"], row["state"], now, now, row["sessions"],
            row["in_flight"], row["config_digest"], alive=True, age_s=0.0,
        )  # fmt: skip

    def replicas(self) -> list[ReplicaRow]:
        self._check()
        return list(self.rows.values())

    def replica_run(self, incarnation: str) -> ReplicaRow | None:
        return next((row for row in self.rows.values() if row.incarnation == incarnation), None)

    def forget_replica(self, incarnation: str) -> None:
        self._check()
        self.rows = {k: row for k, row in self.rows.items() if row.incarnation != incarnation}

    def close(self) -> None:
        self.closed += 1


async def inline(fn: Callable[[], Any]) -> Any:
    """A store call on the loop (the real one runs in a worker thread)."""
    await trio.lowlevel.checkpoint()
    return fn()


def heartbeats(rows: MemoryRows, events: Broadcast[Mapping[str, Any]] | None = None) -> Heartbeats:
    return Heartbeats(ME, lambda: rows, digest="d1", events=events, offload=inline)


async def test_it_beats_every_heartbeat_s_and_at_once_on_drain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rows = MemoryRows()
    beats = heartbeats(rows)
    beats.sessions, beats.in_flight = (lambda: 3), (lambda: 1)
    assert beats.unready() is not None and beats.unready().startswith("starting")  # type: ignore[union-attr]
    start = trio.current_time()
    async with heartbeats_running(beats):
        assert beats.fresh and beats.unready() is None  # the first beat came before the block
        await trio.sleep(1.1)
        times = [round(at - start, 2) for at, _ in rows.beats]
        assert times == [0.0, 0.25, 0.5, 0.75, 1.0]
        assert rows.rows["r1"].address is None  # serve has not said where it listens yet
        beats.set_address("http://127.0.0.1:9/")  # a beat at once carries it
        await trio.sleep(0.05)
        assert round(rows.beats[-1][0] - start, 2) == 1.1
        row = rows.rows["r1"]
        assert (row.state, row.sessions, row.in_flight, row.address, row.config_digest) == (
            "serving", 3, 1, "http://127.0.0.1:9", "d1",
        )  # fmt: skip
        await beats.drain_written()  # at once, not at the next tick
        assert rows.beats[-1] == (pytest.approx(trio.current_time()), "draining")
        assert round(rows.beats[-1][0] - start, 2) == 1.15
        assert beats.unready() == "draining: this replica is stopping"
    assert rows.rows == {} and rows.closed == 1  # a clean stop removes the row


async def test_a_given_address_is_kept_over_the_bound_one(autojump_clock: trio.testing.MockClock) -> None:
    given = ReplicaIdentity("r1", "r1:b", attrs.evolve(CLUSTER, address="http://10.0.0.5:8080"))
    beats = Heartbeats(given, MemoryRows, digest="d1", offload=inline)
    beats.set_address("http://127.0.0.1:9")
    assert beats.address == "http://10.0.0.5:8080"


async def test_an_outage_warns_once_goes_stale_after_the_ttl_and_recovers(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "supervisor.cluster")
    rows = MemoryRows()
    beats = heartbeats(rows)
    async with heartbeats_running(beats):
        await trio.sleep(0.1)
        rows.down = True
        await trio.sleep(0.5)
        assert beats.fresh  # the last good beat (at 0) is within the TTL
        await trio.sleep(0.45)  # 1.05 s after it
        assert not beats.fresh
        assert (beats.unready() or "").startswith("heartbeat stale: none written for 1.")
        await trio.sleep(2)
        failed = [r for r in caplog.records if "heartbeat failed" in r.getMessage()]
        assert len(failed) == 1 and "connection refused" in failed[0].getMessage()
        assert beats.failures == 12  # kept trying, every heartbeat_s
        rows.down = False
        await trio.sleep(0.25)
        assert beats.fresh and beats.unready() is None
        assert sum("heartbeat restored" in r.getMessage() for r in caplog.records) == 1
        rows.down = True  # a second outage: a second warning
        await trio.sleep(0.5)
        assert sum("heartbeat failed" in r.getMessage() for r in caplog.records) == 2


async def test_a_live_replica_with_another_config_is_warned_about_once_per_digest(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "supervisor.cluster")
    rows = MemoryRows()
    events: Broadcast[Mapping[str, Any]] = Broadcast()
    beats = heartbeats(rows, events)
    with events.subscribe() as sub:
        async with heartbeats_running(beats):
            rows.beat(
                "r2", "r2:x", address=None, state="serving", sessions=0, in_flight=0, config_digest="d1"
            )
            await trio.sleep(1)
            assert not caplog.records  # same digest: nothing to say
            rows.beat(
                "r2", "r2:x", address=None, state="serving", sessions=0, in_flight=0, config_digest="d2"
            )
            await trio.sleep(1)
            rows.beat(
                "r3", "r3:x", address=None, state="serving", sessions=0, in_flight=0, config_digest="d2"
            )
            await trio.sleep(1)
        got = [sub.events.receive_nowait(), sub.events.receive_nowait()]
        with pytest.raises(trio.WouldBlock):
            sub.events.receive_nowait()
    assert got == [
        {"type": "replica_config_differs", "peer": "r2", "peer_digest": "d2", "config_digest": "d1"},
        {"type": "replica_config_differs", "peer": "r3", "peer_digest": "d2", "config_digest": "d1"},
    ]
    warned = [r.getMessage() for r in caplog.records if "replica config differs" in r.getMessage()]
    assert len(warned) == 2 and "peer=r2" in warned[0] and "peer=r3" in warned[1]


async def test_a_stop_whose_goodbye_fails_says_so(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "supervisor.cluster")
    rows = MemoryRows()
    async with heartbeats_running(heartbeats(rows)):
        rows.down = True
    assert any("heartbeat row not removed" in r.getMessage() for r in caplog.records)
    assert rows.closed == 1
