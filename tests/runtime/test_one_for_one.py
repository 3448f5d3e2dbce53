"""The one-for-one supervisor on the autojump clock (Erlang/OTP semantics: restart the
child that died, give up past the restart intensity)."""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from actors.connection.schedule import jittered
from supervisor.runtime.one_for_one import ChildSpec, OneForOne, SupervisorGaveUp

WAIT_S = 1_000.0  # virtual seconds

Event = tuple[str, str]
Behaviour = Callable[["FakeChild"], Awaitable[None]]


class FakeChild:
    """A child that logs its life and behaves as scripted, once per (re)start."""

    def __init__(
        self,
        name: str,
        log: list[Event],
        behave: Behaviour | None = None,
        *,
        startup_s: float = 1.0,
        shutdown_s: float = 0.0,
        obeys_stop: bool = True,
        deliverable: bool = True,
    ) -> None:
        self.name = name
        self.log = log
        self.behave = behave or wait_for_stop
        self.startup_s = startup_s
        self.shutdown_s = shutdown_s
        self.obeys_stop = obeys_stop
        self.deliverable = deliverable
        self.starts = 0
        self.stop_requested = trio.Event()

    def spec(self) -> ChildSpec:
        return ChildSpec(self.name, lambda: self.run, self.request_stop)

    def request_stop(self) -> bool:
        self.log.append(("stop requested", self.name))
        if not self.deliverable:
            return False
        if self.obeys_stop:
            self.stop_requested.set()
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.starts += 1
        self.log.append(("starting", self.name))
        try:
            await trio.sleep(self.startup_s)  # the next child must not start meanwhile
            task_status.started()
            self.log.append(("started", self.name))
            await self.behave(self)
            self.log.append(("returned", self.name))
        except trio.Cancelled:
            self.log.append(("cancelled", self.name))
            raise


async def wait_for_stop(child: FakeChild) -> None:
    await child.stop_requested.wait()
    await trio.sleep(child.shutdown_s)  # a graceful exit may take a while


def crash_after(delay_s: float, times: int | None = None) -> Behaviour:
    """Raise ``ValueError("<name> crash <n>")`` after ``delay_s``, the first ``times`` runs."""

    async def behave(child: FakeChild) -> None:
        if times is not None and child.starts > times:
            await wait_for_stop(child)
            return
        await trio.sleep(delay_s)
        raise ValueError(f"{child.name} crash {child.starts}")

    return behave


def of(log: list[Event], what: str) -> list[str]:
    return [name for kind, name in log if kind == what]


# ---------------------------------------------------------------- order


async def test_children_start_in_order_and_stop_in_reverse(autojump_clock: trio.testing.MockClock) -> None:
    log: list[Event] = []
    children = [FakeChild(name, log) for name in ("a", "b", "c")]
    supervisor = OneForOne()
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [c.spec() for c in children])
            assert log == [
                ("starting", "a"),
                ("started", "a"),
                ("starting", "b"),
                ("started", "b"),
                ("starting", "c"),
                ("started", "c"),
            ]
            assert trio.current_time() == pytest.approx(3.0)  # one after the other, not together
            log.clear()
            await supervisor.stop()
            assert log == [
                ("stop requested", "c"),
                ("returned", "c"),
                ("stop requested", "b"),
                ("returned", "b"),
                ("stop requested", "a"),
                ("returned", "a"),
            ]
    assert [c.starts for c in children] == [1, 1, 1]


async def test_start_child_later_follows_the_same_rules(autojump_clock: trio.testing.MockClock) -> None:
    log: list[Event] = []
    first, late = FakeChild("first", log), FakeChild("late", log, crash_after(1.0, times=1))
    supervisor = OneForOne()
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [first.spec()])
            await supervisor.start_child(late.spec())
            assert ("started", "late") in log
            await trio.sleep(10)
            assert late.starts == 2
            assert supervisor.restart_counts() == {"first": 0, "late": 1}
            await supervisor.stop()
    assert of(log, "stop requested") == ["late", "first"]


async def test_a_dynamic_supervisor_runs_with_no_child_until_stopped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[Event] = []
    supervisor = OneForOne(dynamic=True)
    returned = trio.Event()

    async def run() -> None:
        await supervisor.run([])
        returned.set()

    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await trio.sleep(60)
            assert not returned.is_set()  # no child, yet still running: one may come
            late = FakeChild("late", log)
            await supervisor.start_child(late.spec())
            assert ("started", "late") in log
            await supervisor.stop()
            await returned.wait()
            with pytest.raises(RuntimeError, match="cannot start x: the supervisor is not running"):
                await supervisor.start_child(FakeChild("x", log).spec())
    assert of(log, "returned") == ["late"]


async def test_stop_child_stops_that_child_alone_and_forgets_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[Event] = []
    children = [FakeChild(name, log, shutdown_s=2.0) for name in ("a", "b", "c")]
    supervisor = OneForOne(dynamic=True, stop_timeout_s=7.0)
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [c.spec() for c in children])
            log.clear()
            began = trio.current_time()
            assert await supervisor.stop_child("b")
            assert trio.current_time() - began == pytest.approx(2.0)  # its own graceful exit
            assert log == [("stop requested", "b"), ("returned", "b")]
            assert supervisor.restart_counts() == {"a": 0, "c": 0}
            assert not await supervisor.stop_child("b")  # gone
            await supervisor.stop()
    assert of(log, "stop requested") == ["b", "c", "a"]
    assert [c.starts for c in children] == [1, 1, 1]


async def test_stop_child_cancels_a_child_that_ignores_the_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[Event] = []
    stubborn, other = FakeChild("stubborn", log, obeys_stop=False), FakeChild("other", log)
    supervisor = OneForOne(stop_timeout_s=7.0)
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [stubborn.spec(), other.spec()])
            began = trio.current_time()
            assert await supervisor.stop_child("stubborn")
            assert trio.current_time() - began == pytest.approx(7.0)
            assert of(log, "cancelled") == ["stubborn"]
            assert stubborn.starts == 1  # a stopped child is not restarted
            await supervisor.stop()
    assert of(log, "returned") == ["other"]


# ---------------------------------------------------------------- restarts


async def test_crashing_child_is_restarted_and_the_others_keep_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[Event] = []
    a, b, c = FakeChild("a", log), FakeChild("b", log, crash_after(5.0, times=1)), FakeChild("c", log)
    supervisor = OneForOne()
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [x.spec() for x in (a, b, c)])
            await trio.sleep(20)
            assert (a.starts, b.starts, c.starts) == (1, 2, 1)
            assert of(log, "cancelled") == []  # nobody else was touched
            assert of(log, "started") == ["a", "b", "c", "b"]
            assert supervisor.restart_counts() == {"a": 0, "b": 1, "c": 0}
            await supervisor.stop()
    assert of(log, "returned") == ["c", "b", "a"]


async def test_too_many_crashes_within_the_window_give_up(autojump_clock: trio.testing.MockClock) -> None:
    log: list[Event] = []
    steady, crashy = FakeChild("steady", log), FakeChild("crashy", log, crash_after(0.5))
    supervisor = OneForOne(max_restarts=3, within_s=5.0)
    with trio.fail_after(WAIT_S), pytest.RaisesGroup(SupervisorGaveUp) as caught:
        await supervisor.run([steady.spec(), crashy.spec()])
    gave_up = caught.value.exceptions[0]
    assert isinstance(gave_up, SupervisorGaveUp)
    assert "crashy" in str(gave_up)
    # The last crash, as the child raised it, is the cause.
    assert isinstance(gave_up.__cause__, ValueError)
    assert str(gave_up.__cause__) == "crashy crash 4"
    assert crashy.starts == 4  # the first run plus max_restarts restarts
    assert of(log, "cancelled") == ["steady"]  # giving up takes the tree down


class ParkedChild(FakeChild):
    """A child whose bug is fixed after ``broken_runs`` runs; parked runs wait the delay
    ``park_s`` gives (as a connection actor waits in backoff) before they try, and
    crash while broken."""

    def __init__(
        self, name: str, log: list[Event], *, broken_runs: int, park_s: float | Callable[[], float]
    ) -> None:
        super().__init__(name, log, startup_s=0.0)
        self.broken_runs = broken_runs
        self.park_s = park_s if callable(park_s) else lambda: park_s
        self.runs: list[tuple[str, float]] = []  # ("start" | "parked", when)
        self.parked_by: list[str] = []
        self.delays: list[float] = []
        self.healthy = trio.CancelScope()

    def spec(self) -> ChildSpec:
        start = lambda: self.run_normal  # noqa: E731
        return ChildSpec(self.name, start, self.request_stop, park=self.park, park_s=self.park_s)

    def park(self, crash: Exception, delay: float) -> Callable[..., Awaitable[None]]:
        self.parked_by.append(str(crash))
        self.delays.append(delay)
        return functools.partial(self.run_parked, delay)

    async def run_normal(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.runs.append(("start", trio.current_time()))
        task_status.started()
        await self.work()

    async def run_parked(
        self, delay: float, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        self.runs.append(("parked", trio.current_time()))
        task_status.started()
        with trio.move_on_after(delay):
            await self.stop_requested.wait()
            return
        await self.work()

    async def work(self) -> None:
        await trio.sleep(0.5)
        if len(self.runs) <= self.broken_runs:
            raise ValueError(f"{self.name} bug in run {len(self.runs)}")
        with trio.CancelScope() as self.healthy:  # cancelled: a late bug strikes
            await wait_for_stop(self)
            return
        raise ValueError(f"{self.name} late bug")


async def test_past_the_intensity_a_child_with_park_is_parked_and_retried_at_its_delay(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    log: list[Event] = []
    steady = FakeChild("steady", log)
    buggy = ParkedChild("buggy", log, broken_runs=6, park_s=60.0)
    supervisor = OneForOne(max_restarts=3, within_s=5.0)
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [steady.spec(), buggy.spec()])
            start = trio.current_time()
            await trio.sleep(200)
            runs = [(kind, round(at - start, 3)) for kind, at in buggy.runs]
            # Four quick runs (the first plus max_restarts), then parked: each parked
            # run tries after 60 s and, crashing again, is parked again at once.
            assert runs == [
                ("start", 0.0),
                ("start", 0.5),
                ("start", 1.0),
                ("start", 1.5),
                ("parked", 2.0),
                ("parked", 62.5),
                ("parked", 123.0),
            ]
            assert buggy.parked_by == ["buggy bug in run 4", "buggy bug in run 5", "buggy bug in run 6"]
            assert of(log, "cancelled") == []  # the other child never noticed
            await supervisor.stop()
    assert of(log, "returned") == ["steady"]
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    parked = [r for r in errors if r.getMessage().startswith("child crashed too often; parked")]
    assert len(parked) == 3 and all(r.exc_info is not None for r in parked)


async def test_parked_children_retry_at_jittered_delays(autojump_clock: trio.testing.MockClock) -> None:
    """Children parked together (one bug, one moment) retry apart: each parking asks
    ``park_s`` anew, here 60 s jittered by a tenth with a seeded generator."""
    seeded = random.Random(5)
    log: list[Event] = []
    children = [
        ParkedChild(f"c{n}", log, broken_runs=100, park_s=lambda: jittered(60.0, 0.1, seeded.random()))
        for n in range(3)
    ]
    supervisor = OneForOne(max_restarts=3, within_s=5.0)
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [child.spec() for child in children])
            await trio.sleep(200)
            await supervisor.stop()
    for child in children:
        parked = [at for kind, at in child.runs if kind == "parked"]
        # Parked at 2 s; each try comes after its own delay, crashes 0.5 s into its
        # work and is parked again at once, with a fresh delay.
        assert [b - a - 0.5 for a, b in itertools.pairwise(parked)] == pytest.approx(
            child.delays[: len(parked) - 1]
        )
        assert all(54.0 <= delay <= 66.0 for delay in child.delays) and len(set(child.delays)) == len(
            child.delays
        )
    first_tries = [child.runs[5][1] for child in children]
    assert len({round(at, 3) for at in first_tries}) == 3, "apart, not in lockstep"


async def test_a_crash_long_after_a_parked_childs_retry_counts_afresh(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[Event] = []
    child = ParkedChild("child", log, broken_runs=4, park_s=10.0)
    supervisor = OneForOne(max_restarts=3, within_s=5.0)
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [child.spec()])
            await trio.sleep(100)  # parked at 2 s, retried at 12 s, fine since
            assert [kind for kind, _ in child.runs] == ["start"] * 4 + ["parked"]
            child.healthy.cancel()  # a new bug, long after the retry: restarted at once
            await trio.sleep(1)
            assert [kind for kind, _ in child.runs] == ["start"] * 4 + ["parked", "start"]
            assert supervisor.restart_counts() == {"child": 1}
            await supervisor.stop()


async def test_exactly_max_restarts_within_the_window_is_tolerated(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[Event] = []
    crashy = FakeChild("crashy", log, crash_after(0.5, times=3))
    supervisor = OneForOne(max_restarts=3, within_s=5.0)
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [crashy.spec()])
            await trio.sleep(4)  # all three crashes and restarts fit in this window
            assert crashy.starts == 4
            assert supervisor.restart_counts() == {"crashy": 3}
            await supervisor.stop()


async def test_crashes_spread_beyond_the_window_restart_forever(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[Event] = []
    # Every 3 s (startup 0 + 3 s): at most two crashes in any 5 s, the limit is two.
    crashy = FakeChild("crashy", log, crash_after(3.0, times=30), startup_s=0.0)
    supervisor = OneForOne(max_restarts=2, within_s=5.0)
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [crashy.spec()])
            await trio.sleep(3.0 * 30 + 1)
            assert crashy.starts == 31
            assert supervisor.restart_counts() == {"crashy": 2}  # only the recent ones count
            await supervisor.stop()
    assert of(log, "returned") == ["crashy"]


async def test_child_that_returns_is_not_restarted(autojump_clock: trio.testing.MockClock) -> None:
    log: list[Event] = []

    async def finish_soon(child: FakeChild) -> None:
        await trio.sleep(2.0)

    done, other = FakeChild("done", log, finish_soon), FakeChild("other", log)
    supervisor = OneForOne()
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [done.spec(), other.spec()])
            await trio.sleep(60)
            assert done.starts == 1
            assert supervisor.restart_counts() == {"done": 0, "other": 0}
            await supervisor.stop()
    assert of(log, "stop requested") == ["other"]  # nothing left to stop for "done"
    assert of(log, "returned") == ["done", "other"]


async def test_run_returns_when_every_child_has_finished(autojump_clock: trio.testing.MockClock) -> None:
    async def finish(child: FakeChild) -> None:
        await trio.sleep(1.0)

    log: list[Event] = []
    supervisor = OneForOne()
    with trio.fail_after(WAIT_S):
        await supervisor.run([FakeChild("x", log, finish).spec(), FakeChild("y", log, finish).spec()])
    assert of(log, "returned") == ["x", "y"]


# ---------------------------------------------------------------- failed start


async def test_child_crashing_before_started_fails_the_start(autojump_clock: trio.testing.MockClock) -> None:
    log: list[Event] = []
    starts = 0

    async def broken(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        nonlocal starts
        starts += 1
        await trio.sleep(1.0)
        raise KeyError("no such command")

    first, last = FakeChild("first", log), FakeChild("last", log)
    children = [first.spec(), ChildSpec("broken", lambda: broken, lambda: True), last.spec()]
    supervisor = OneForOne()
    with trio.fail_after(WAIT_S), pytest.RaisesGroup(KeyError, flatten_subgroups=True):
        await supervisor.run(children)
    assert starts == 1  # a start failure is not restarted
    assert last.starts == 0  # later children never start
    assert of(log, "cancelled") == ["first"]


async def test_child_returning_without_reporting_started_fails_the_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def silent(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await trio.sleep(1.0)

    supervisor = OneForOne()
    with (
        trio.fail_after(WAIT_S),
        pytest.RaisesGroup(
            pytest.RaisesExc(RuntimeError, match="silent returned without reporting it started"),
            flatten_subgroups=True,
        ),
    ):
        await supervisor.run([ChildSpec("silent", lambda: silent, lambda: True)])


async def test_each_child_runs_in_one_task_of_the_supervisors_nursery(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No nursery and task of its own per child: one Trio task per supervised child,
    which is what 1,000 supervised servers cost here (benchmarks/RESULTS.md)."""
    log: list[Event] = []
    children = [FakeChild(name, log) for name in ("a", "b", "c")]
    supervisor = OneForOne()
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [c.spec() for c in children])
            (tree,) = nursery.child_tasks
            (inner,) = tree.child_nurseries
            assert len(inner.child_tasks) == 3
            assert all(not task.child_nurseries for task in inner.child_tasks)
            await supervisor.stop()


# ---------------------------------------------------------------- stop


async def test_stop_cancels_a_child_that_ignores_the_request(autojump_clock: trio.testing.MockClock) -> None:
    log: list[Event] = []
    polite, stubborn = FakeChild("polite", log), FakeChild("stubborn", log, obeys_stop=False)
    supervisor = OneForOne(stop_timeout_s=7.0)
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [polite.spec(), stubborn.spec()])
            began = trio.current_time()
            await supervisor.stop()
            assert trio.current_time() - began == pytest.approx(7.0)
    assert log[-4:] == [
        ("stop requested", "stubborn"),
        ("cancelled", "stubborn"),
        ("stop requested", "polite"),
        ("returned", "polite"),
    ]
    assert stubborn.starts == 1  # a cancelled child is not restarted


async def test_stop_cancels_at_once_when_the_request_cannot_be_delivered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[Event] = []
    unreachable = FakeChild("unreachable", log, deliverable=False)
    supervisor = OneForOne(stop_timeout_s=7.0)
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [unreachable.spec()])
            began = trio.current_time()
            await supervisor.stop()
            assert trio.current_time() == began
    assert of(log, "cancelled") == ["unreachable"]


async def test_a_polite_child_stops_without_waiting_for_the_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[Event] = []
    supervisor = OneForOne(stop_timeout_s=7.0)
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, [FakeChild("polite", log, shutdown_s=2.0).spec()])
            began = trio.current_time()
            await supervisor.stop()
            assert trio.current_time() - began == pytest.approx(2.0)
    assert of(log, "cancelled") == []
    assert of(log, "returned") == ["polite"]


async def test_a_child_that_crashes_while_stopping_is_not_restarted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    starts = 0
    stop = trio.Event()

    def start() -> Any:
        async def child(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            nonlocal starts
            starts += 1
            task_status.started()
            await stop.wait()
            raise RuntimeError("boom on the way out")

        return child

    def request_stop() -> bool:
        stop.set()
        return True

    tree = OneForOne(stop_timeout_s=10.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(tree.run, [ChildSpec("c", start, request_stop)])
        before = trio.current_time()
        await tree.stop()
        assert trio.current_time() - before < 1.0  # no wait for the stop timeout
    assert starts == 1
