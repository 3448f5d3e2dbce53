"""Give the C heap's free pages back to the system now and then (glibc's ``malloc_trim``).

A long-lived supervisor allocates and frees in every size (tool lists, catalogs, the
processes spawned on each reconnect). glibc keeps what was freed inside its heaps for
reuse, so RSS creeps up with fragmentation after live memory has stopped growing: in an
8-minute soak malloc's free space grew 3.9 → 6.6 MB while its bytes in use stayed flat
at 8.6-8.8 MB (benchmarks/RESULTS.md). ``malloc_trim(0)`` hands every whole free page
back (madvise), the remedy Dask's workers use for the same creep. It runs in a worker
thread (ctypes releases the GIL) so the event loop never waits for it. Where malloc is
not glibc's there is nothing to call, and nothing is done.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import trio

from actors.log_events import get_logger

log = get_logger("supervisor.memory_trim")

TRIM_EVERY_S = 60.0


def find_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None (musl, macOS …)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


async def trim_memory_periodically(
    every_s: float = TRIM_EVERY_S, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Trim every ``every_s`` seconds until cancelled; return at once without glibc."""
    trim = find_malloc_trim()
    task_status.started()
    if trim is None:
        log.debug("no malloc_trim here; the C heap is left as it is")
        return
    while True:
        await trio.sleep(every_s)
        await trio.to_thread.run_sync(trim, 0, abandon_on_cancel=True)
