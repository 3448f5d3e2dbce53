"""The periodic malloc_trim: on schedule (virtual time), harmless without glibc."""

from __future__ import annotations

import ctypes
import sys
import threading

import pytest
import trio
import trio.testing

from supervisor.runtime import memory_trim


async def test_trims_once_per_interval_in_a_worker_thread(
    thread_safe_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pads: list[int] = []
    threads: list[int] = []

    def fake_trim(pad: int) -> int:
        pads.append(pad)
        threads.append(threading.get_ident())
        return 1

    monkeypatch.setattr(memory_trim, "find_malloc_trim", lambda: fake_trim)
    seen: list[int] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(memory_trim.trim_memory_periodically, 60.0)
        for _ in range(3):
            await trio.sleep(60.0)
            await trio.sleep(0.2)  # virtual; the thread's real few µs pass meanwhile
            seen.append(len(pads))
        nursery.cancel_scope.cancel()
    assert seen == [1, 2, 3]  # one trim per 60 s, none in between
    assert pads == [0, 0, 0]  # no padding kept: every whole free page goes back
    assert threading.get_ident() not in threads  # the event loop never waits for it


async def test_without_malloc_trim_the_task_ends_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_trim, "find_malloc_trim", lambda: None)
    with trio.fail_after(1):
        async with trio.open_nursery() as nursery:
            await nursery.start(memory_trim.trim_memory_periodically, 60.0)
    # nothing left running: the nursery closed without a cancel


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's (Linux)")
def test_glibc_malloc_trim_is_found_and_callable() -> None:
    try:
        ctypes.CDLL(None).gnu_get_libc_version  # noqa: B018 - probing for glibc
    except AttributeError:
        pytest.skip("this Linux's C library is not glibc (musl?)")
    trim = memory_trim.find_malloc_trim()
    assert trim is not None
    assert trim(0) in (0, 1)  # 1: memory was released, 0: there was none to release
