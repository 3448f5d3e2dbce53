"""Worker: client RSS per open stdio connection (ours or the SDK), one process per count.

    python benchmarks/bench_memory.py --client floor|ours|sdk [--connections N] [--trace]

Both clients first open one connection, call once and close it (so lazily imported
code and first-use caches are loaded), collect garbage and read VmRSS from
/proc/self/status: the baseline. Then they open N connections to N minimal servers
(separate processes: their memory is not ours), finish the handshake and
``tools/list`` on each, make one call on each, collect garbage and read VmRSS again.
Per connection = (after - baseline) / N.

* ours: one ``Supervisor.open`` with N eager, trusted servers (connection actors,
  transports, protocol sessions, catalog entries, pidfiles, audit rows included);
* floor: N ``FloorClient`` connections (benchmarks/floor_client.py);
* sdk: N ``stdio_client`` + ``ClientSession`` pairs (``initialize``, ``list_tools``,
  one ``call_tool``) in N tasks under ``anyio.run(backend="trio")``.

``--trace`` (ours) also reports Python allocations per connection (tracemalloc),
charged to the innermost line of our own code on the allocating stack; tracing
inflates the RSS figures of that run, so take those from a run without it.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from typing import Any

from _common import ROOT, emit, ours_config, quiet_logging, raise_fd_limit, rss_kb, server_argv, wait_steady


async def ours(count: int, trace: bool = False) -> dict[str, Any]:
    import trio

    from supervisor import Supervisor

    quiet_logging()
    with tempfile.TemporaryDirectory(prefix="bench-mem-") as state_dir:
        config = ours_config([("warm", server_argv())], eager=True)
        async with Supervisor.open(config, state_dir=state_dir) as sup, sup.session() as session:
            turn = await session.begin_turn()
            assert (await turn.call("warm_echo", {"text": "hi"})).ok
        del sup, session, turn
    gc.collect()
    baseline = rss_kb()
    before = _trace_start(trace)
    names = [f"s{i:04d}" for i in range(count)]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-mem-") as state_dir:
        config = ours_config([(name, server_argv()) for name in names], eager=True, search=False)
        async with Supervisor.open(config, state_dir=state_dir) as sup, sup.session() as session:
            await wait_steady(sup, names)
            steady_s = time.perf_counter() - started
            turn = await session.begin_turn()
            failures = 0

            async def one(name: str) -> None:
                nonlocal failures
                envelope = await turn.call(f"{name}_echo", {"text": "hi"})
                failures += not envelope.ok

            async with trio.open_nursery() as nursery:
                for name in names:
                    nursery.start_soon(one, name)
            await sup.store.flush()
            gc.collect()
            after = rss_kb()
            top = _trace_top(before, count)
    return {**_result("ours", count, baseline, after, steady_s, failures), "top": top}


async def floor(count: int) -> dict[str, Any]:
    import trio
    from floor_client import FloorClient

    async def connection(nursery: trio.Nursery) -> FloorClient:
        client = await FloorClient.spawn(server_argv(), nursery)
        await client.handshake()
        return client

    async with trio.open_nursery() as nursery:
        warm = await connection(nursery)
        assert (await warm.call("echo", {"text": "hi"}))["content"][0]["text"] == "hi"
        await warm.aclose()
        del warm
        gc.collect()
        baseline = rss_kb()
        started = time.perf_counter()
        clients: list[FloorClient] = []
        failures = 0

        async def one() -> None:
            nonlocal failures
            client = await connection(nursery)
            clients.append(client)
            result = await client.call("echo", {"text": "hi"})
            failures += result["content"][0]["text"] != "hi"

        async with trio.open_nursery() as openers:
            for _ in range(count):
                openers.start_soon(one)
        steady_s = time.perf_counter() - started
        gc.collect()
        after = rss_kb()
        for client in clients:
            await client.aclose()
        nursery.cancel_scope.cancel()
    return _result("floor", count, baseline, after, steady_s, failures)


async def sdk(count: int) -> dict[str, Any]:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    argv = server_argv()
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    failures = 0

    async def connection(ready: Any, stop: anyio.Event) -> None:
        nonlocal failures
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            result = await session.call_tool("echo", {"text": "hi"})
            failures += result.content[0].text != "hi"
            ready()
            await stop.wait()

    warm_stop = anyio.Event()
    warm_stop.set()
    await connection(lambda: None, warm_stop)
    gc.collect()
    baseline = rss_kb()
    started = time.perf_counter()
    opened = 0
    all_open = anyio.Event()
    stop = anyio.Event()

    def ready() -> None:
        nonlocal opened
        opened += 1
        if opened == count:
            all_open.set()

    async with anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(connection, ready, stop)
        await all_open.wait()
        steady_s = time.perf_counter() - started
        gc.collect()
        after = rss_kb()
        stop.set()
    return _result("sdk", count, baseline, after, steady_s, failures)


def _trace_start(trace: bool) -> Any:
    if not trace:
        return None
    import tracemalloc

    tracemalloc.start(40)
    return tracemalloc.take_snapshot()


def _trace_top(before: Any, count: int, limit: int = 60) -> list[tuple[str, float]]:
    """Python allocations made since ``before``, charged to the innermost line of our
    own code (actors/, supervisor/) on the allocating stack, in bytes per connection."""
    if before is None:
        return []
    import collections
    import tracemalloc

    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    sites: collections.Counter[str] = collections.Counter()
    total = 0
    for stat in after.compare_to(before, "traceback"):
        total += stat.size_diff
        frames = list(stat.traceback)
        ours = [f for f in frames if f.filename.startswith((f"{ROOT}/actors/", f"{ROOT}/supervisor/"))]
        frame = ours[-1] if ours else frames[-1]
        name = frame.filename.split("site-packages/")[-1].removeprefix(f"{ROOT}/")
        sites[f"{name}:{frame.lineno}"] += stat.size_diff
    top = [("(all Python allocations)", total / count)]
    top.extend((where, size / count) for where, size in sites.most_common(limit))
    return top


def _result(
    client: str, count: int, baseline: int, after: int, steady_s: float, failures: int
) -> dict[str, Any]:
    return {
        "client": client,
        "connections": count,
        "baseline_kb": baseline,
        "after_kb": after,
        "per_connection_kb": (after - baseline) / count,
        "open_s": steady_s,
        "failed_calls": failures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", required=True, choices=["floor", "ours", "sdk"])
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--trace", action="store_true", help="ours: tracemalloc the top allocation sites")
    args = parser.parse_args()
    raise_fd_limit(8 * args.connections + 256)
    if args.client == "ours":
        import trio

        result = trio.run(ours, args.connections, args.trace)
    elif args.client == "floor":
        import trio

        result = trio.run(floor, args.connections)
    else:
        import anyio

        result = anyio.run(sdk, args.connections, backend="trio")
    emit(result)


if __name__ == "__main__":
    sys.exit(main())
