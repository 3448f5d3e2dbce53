"""Worker: N supervised stdio servers (our minimal server) in one supervisor process.

    python benchmarks/bench_scale.py [--servers N] [--seconds S]

Measures: time from entering ``Supervisor.open`` (every server eager) until every
server is steady; the supervisor's RSS and open descriptors before and after; one
call to every server at once (N calls in flight across N connections); then ``-S``
seconds of calls across all of them (one task per server calling in a loop): calls/s
and per-call latency; and ``begin_turn()`` with N servers in the catalog (search on).
The servers' own memory is not counted (separate processes); their count and the
machine's free memory are reported.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from typing import Any

from _common import emit, open_fds, ours_config, quantiles, quiet_logging, raise_fd_limit, rss_kb, server_argv


def _mem_available_mb() -> int:
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return -1


async def scale(servers: int, seconds: float) -> dict[str, Any]:
    import trio

    from supervisor import Supervisor

    quiet_logging()
    names = [f"s{i:04d}" for i in range(servers)]
    out: dict[str, Any] = {"servers": servers, "mem_available_mb_before": _mem_available_mb()}
    gc.collect()
    out["rss_kb_start"] = rss_kb()
    out["fds_start"] = open_fds()
    config = ours_config([(name, server_argv()) for name in names], eager=True, init_timeout_s=300.0)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as state_dir:
        started = time.perf_counter()
        echoes = [f"{name}_echo" for name in names]  # pinned: a turn calls only the tools it shows
        async with Supervisor.open(config, state_dir=state_dir) as sup, sup.session(pinned=echoes) as session:
            steady_at: list[float] = []
            wanted = set(names)

            def all_steady(catalog: Any) -> bool:
                views = catalog.servers
                up = sum(1 for name in wanted if views[name].available)
                if up and len(steady_at) < 1:
                    steady_at.append(time.perf_counter() - started)  # first one up
                return up == len(wanted)

            await sup.router.cell.wait_until(all_steady)
            out["all_steady_s"] = time.perf_counter() - started
            out["first_steady_s"] = steady_at[0] if steady_at else None
            out["mem_available_mb_steady"] = _mem_available_mb()
            gc.collect()
            out["rss_kb_steady"] = rss_kb()
            out["fds_steady"] = open_fds()

            turn = await session.begin_turn()
            out["catalog_tools"] = len(turn.catalog.tools)
            out["search_enabled"] = turn.search_enabled
            samples = []
            for _ in range(500):
                t0 = time.perf_counter()
                await session.begin_turn()
                samples.append((time.perf_counter() - t0) * 1e6)
            out["begin_turn_us"] = quantiles(samples)

            failures: dict[str, int] = {}

            async def once(name: str) -> None:
                envelope = await turn.call(f"{name}_echo", {"text": "hi"})
                if not envelope.ok:
                    code = envelope.error.code if envelope.error else "?"
                    failures[code] = failures.get(code, 0) + 1

            t0 = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for name in names:
                    nursery.start_soon(once, name)
            out["one_call_each_s"] = time.perf_counter() - t0

            latencies: list[float] = []
            deadline = time.perf_counter() + seconds

            async def loop(name: str) -> None:
                tool = f"{name}_echo"
                clock = time.perf_counter
                while clock() < deadline:
                    t = clock()
                    envelope = await turn.call(tool, {"text": "hi"})
                    latencies.append((clock() - t) * 1000)
                    if not envelope.ok:
                        code = envelope.error.code if envelope.error else "?"
                        failures[code] = failures.get(code, 0) + 1

            t0 = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for name in names:
                    nursery.start_soon(loop, name)
            elapsed = time.perf_counter() - t0
            out["loop_calls"] = len(latencies)
            out["loop_calls_s"] = len(latencies) / elapsed
            out["loop_latency_ms"] = quantiles(latencies)
            out["failures"] = failures
            gc.collect()
            out["rss_kb_after_calls"] = rss_kb()
            stop_started = time.perf_counter()
        out["stop_s"] = time.perf_counter() - stop_started
    out["fds_end"] = open_fds()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    raise_fd_limit(8 * args.servers + 256)
    import trio

    emit(trio.run(scale, args.servers, args.seconds))


if __name__ == "__main__":
    sys.exit(main())
