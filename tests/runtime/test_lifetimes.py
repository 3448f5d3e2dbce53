"""``supervisor.runtime.lifetimes.lifetime``: a nursery that stops what it holds when it ends,
and lets out only the errors that are not the stop's own doing (autojump clock)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from supervisor.runtime.lifetimes import lifetime

WAIT_S = 1_000.0


def _reader(
    receive: trio.MemoryReceiveChannel[int],
) -> Callable[..., Awaitable[None]]:
    async def read(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for _ in receive:
            pass

    return read


async def test_a_task_whose_channel_the_stop_closes_ends_quietly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    _send, receive = trio.open_memory_channel[int](0)

    async def stop() -> None:
        receive.close()  # the reader, blocked in receive, gets ClosedResourceError

    with trio.fail_after(WAIT_S):
        async with lifetime(stop) as nursery:
            await nursery.start(_reader(receive))


async def test_the_same_error_before_the_stop_comes_out(autojump_clock: trio.testing.MockClock) -> None:
    _send, receive = trio.open_memory_channel[int](0)
    with trio.fail_after(WAIT_S), pytest.RaisesGroup(trio.ClosedResourceError):
        async with lifetime() as nursery:
            await nursery.start(_reader(receive))
            receive.close()  # not a stop: a task of ours failed while running
            await trio.sleep(1)


async def test_an_unexpected_error_at_the_stop_comes_out(autojump_clock: trio.testing.MockClock) -> None:
    stopping = trio.Event()

    async def fails_at_the_stop(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await stopping.wait()
        raise KeyError("a bug")

    async def stop() -> None:
        stopping.set()
        await trio.sleep(1)

    with trio.fail_after(WAIT_S), pytest.RaisesGroup(KeyError):
        async with lifetime(stop) as nursery:
            await nursery.start(fails_at_the_stop)


async def test_the_blocks_own_shutdown_error_is_never_removed(autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(WAIT_S), pytest.RaisesGroup(trio.ClosedResourceError):
        async with lifetime(transparent=False):
            raise trio.ClosedResourceError("the host's own")


async def test_nested_lifetimes_add_no_group_around_what_passes_through(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The host sees one group, as from one nursery, however deep the lifetimes nest."""
    error = ValueError("host")
    with trio.fail_after(WAIT_S), pytest.RaisesGroup(pytest.RaisesExc(ValueError, match="host")) as caught:
        async with lifetime(), lifetime(), lifetime(transparent=False):
            raise error
    assert caught.value.exceptions == (error,)


async def test_a_failing_inner_lifetime_comes_out_once_and_stops_the_outer_ones(
    autojump_clock: trio.testing.MockClock,
) -> None:
    stopped: list[str] = []

    def stop(name: str) -> Callable[[], Awaitable[None]]:
        async def record() -> None:
            stopped.append(name)

        return record

    async def crash(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep(1)
        raise RuntimeError("inner task")

    with trio.fail_after(WAIT_S), pytest.RaisesGroup(RuntimeError):
        async with lifetime(stop("outer")), lifetime(stop("inner")) as inner:
            await inner.start(crash)
            await trio.sleep_forever()
    assert stopped == ["inner", "outer"]


async def test_the_stop_runs_shielded_and_bounded_when_the_host_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    finished = trio.Event()

    async def slow_stop() -> None:
        await trio.sleep(3)  # graceful work that takes a while
        finished.set()
        await trio.sleep_forever()  # and then hangs: the grace bounds it

    with trio.move_on_after(5) as host:
        async with lifetime(slow_stop, grace_s=10):
            await trio.sleep_forever()
    assert host.cancelled_caught
    assert finished.is_set()
    assert trio.current_time() == pytest.approx(15)  # the host's 5 s, then the whole grace
