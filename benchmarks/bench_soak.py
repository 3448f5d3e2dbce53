"""Worker: soak — calls, crashes and list_changed storms for N minutes; memory and fds.

    python benchmarks/bench_soak.py [--minutes M] [--servers S] [--inflight K]

S minimal servers under one supervisor (reconnect schedule ``[0]``): a third plain,
a third announcing ``tools/list_changed`` after every 20th call (each one toggles a
tool, so the router re-lists and builds a new epoch), a third crashing on their
300th call (``--crash-after``: the process exits mid-call). A killer task also sends
SIGKILL to a random server every 2 s. K worker tasks loop: a new session every 400
calls, a new turn every 40, one call to a random server's echo each time.

Every 5 s we sample RSS, open descriptors, child processes, the catalog epoch and the
counters. Reported: the samples at the end of the warm-up (the first tenth of the
run, at least 10 s) and at the end, growth in percent, the largest RSS seen, call
outcomes by code, and whether any server process outlived the supervisor. ``--trace``
also reports where Python-level memory grew after the warm-up (tracemalloc; it slows
the run and adds its own memory, so take RSS figures from a run without it).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import signal
import sys
import tempfile
import time
from typing import Any

from _common import (
    ROOT,
    child_pids,
    emit,
    heap_kb,
    open_fds,
    ours_config,
    quiet_logging,
    raise_fd_limit,
    rss_kb,
    rss_parts,
    server_argv,
    server_pid,
)

SAMPLE_EVERY_S = 5.0
KILL_EVERY_S = 2.0


def _flags(i: int) -> list[str]:
    kind = i % 3
    if kind == 1:
        return ["--list-changed-every", "20"]
    if kind == 2:
        return ["--crash-after", "300"]
    return []


async def soak(minutes: float, servers: int, inflight: int, trace: bool = False) -> dict[str, Any]:
    import trio

    from supervisor import Supervisor

    quiet_logging()
    names = [f"s{i:02d}" for i in range(servers)]
    echoes = [f"{name}_echo" for name in names]
    config = ours_config([(name, server_argv(*_flags(i))) for i, name in enumerate(names)], eager=True)
    duration = minutes * 60.0
    warmup = max(10.0, duration / 10.0)
    codes: dict[str, int] = {}
    counts = {"calls": 0, "turns": 0, "sessions": 0, "kills": 0}
    samples: list[dict[str, Any]] = []
    rng = random.Random(5)
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as state_dir:
        started = time.perf_counter()
        deadline = started + duration
        async with Supervisor.open(config, state_dir=state_dir) as sup:

            def sample() -> None:
                gc.collect()
                store = sup.store.statistics()
                samples.append(
                    {
                        "t_s": round(time.perf_counter() - started, 1),
                        "rss_kb": rss_kb(),
                        "rss_parts": rss_parts(),
                        "heap": heap_kb(),
                        "fds": open_fds(),
                        "children": len(child_pids()),
                        "epoch": sup.router.cell.current.epoch,
                        "calls": counts["calls"],
                        "audit_written": store.written,
                        "audit_dropped": store.dropped,
                    }
                )

            async def worker(seed: int) -> None:
                local = random.Random(seed)
                while time.perf_counter() < deadline:
                    async with sup.session(pinned=echoes) as session:  # a turn calls what it shows
                        counts["sessions"] += 1
                        for _ in range(10):
                            turn = await session.begin_turn()
                            counts["turns"] += 1
                            for _ in range(40):
                                name = local.choice(names)
                                envelope = await turn.call(f"{name}_echo", {"text": "soak"})
                                code = (
                                    "ok" if envelope.ok else (envelope.error.code if envelope.error else "?")
                                )
                                codes[code] = codes.get(code, 0) + 1
                                counts["calls"] += 1
                            if time.perf_counter() >= deadline:
                                return

            async def killer() -> None:
                while time.perf_counter() < deadline:
                    await trio.sleep(KILL_EVERY_S)
                    name = rng.choice(names)
                    try:
                        pid = await server_pid(sup, name)
                    except RuntimeError:
                        continue  # between connections: try another next time
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue  # it crashed by itself (--crash-after) in between
                    counts["kills"] += 1

            traced: list[Any] = []

            async def sampler() -> None:
                while time.perf_counter() < deadline:
                    sample()
                    if trace and not traced and time.perf_counter() - started >= warmup:
                        import tracemalloc

                        tracemalloc.start(25)
                        traced.append(tracemalloc.take_snapshot())
                    await trio.sleep(SAMPLE_EVERY_S)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(sampler)
                nursery.start_soon(killer)
                for i in range(inflight):
                    nursery.start_soon(worker, i)
            sample()
            final_epoch = sup.router.cell.current.epoch
            growth = _growth(traced[0]) if traced else []
        leftover = child_pids()
    report = _report(samples, warmup, codes, counts, final_epoch, leftover, minutes, servers, inflight)
    if trace:
        report["python_growth"] = growth
    return report


def _growth(before: Any, limit: int = 15) -> list[tuple[int, str]]:
    """Python allocations that grew since ``before``, per innermost line of our code."""
    import collections
    import tracemalloc

    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    sites: collections.Counter[str] = collections.Counter()
    total = 0
    for stat in after.compare_to(before, "traceback"):
        total += stat.size_diff
        frames = list(stat.traceback)
        ours = [f for f in frames if "/actors/" in f.filename or "/supervisor/" in f.filename]
        frame = ours[-1] if ours else frames[-1]
        where = frame.filename.split("site-packages/")[-1].removeprefix(f"{ROOT}/")
        sites[f"{where}:{frame.lineno}"] += stat.size_diff
    return [(total, "(all Python allocations)"), *((size, where) for where, size in sites.most_common(limit))]


def _report(
    samples: list[dict[str, Any]],
    warmup: float,
    codes: dict[str, int],
    counts: dict[str, int],
    final_epoch: int,
    leftover: list[int],
    minutes: float,
    servers: int,
    inflight: int,
) -> dict[str, Any]:
    after_warmup = next((s for s in samples if s["t_s"] >= warmup), samples[0])
    end = samples[-1]
    return {
        "minutes": minutes,
        "servers": servers,
        "inflight": inflight,
        "warmup_s": warmup,
        "start": after_warmup,
        "end": end,
        "rss_growth_pct": 100.0 * (end["rss_kb"] - after_warmup["rss_kb"]) / after_warmup["rss_kb"],
        "rss_max_kb": max(s["rss_kb"] for s in samples),
        "fd_growth": end["fds"] - after_warmup["fds"],
        "codes": codes,
        "counts": counts,
        "epochs": final_epoch,
        "leftover_processes": len(leftover),
        "samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--servers", type=int, default=9)
    parser.add_argument("--inflight", type=int, default=8)
    parser.add_argument(
        "--trace", action="store_true", help="tracemalloc after the warm-up: where Python memory grew"
    )
    args = parser.parse_args()
    raise_fd_limit(1024)
    import trio

    emit(trio.run(soak, args.minutes, args.servers, args.inflight, args.trace))


if __name__ == "__main__":
    sys.exit(main())
