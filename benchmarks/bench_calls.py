"""Worker: sequential latency and 64-in-flight throughput of one client, one repetition.

    python benchmarks/bench_calls.py --client floor|ours|ours-aio|sdk-trio|sdk-asyncio
                                     [--seq N] [--tput N] [--inflight 64] [--warmup N]
                                     [--what-if linger,policy,...] [--count-io]
                                     [--tracing none|idle|batch] [--with-limits]
                                     [--store-url postgresql://...]

Every client talks to the same minimal server (benchmarks/minimal_server.py) over a
pipe and calls its ``echo`` tool with ``{"text": "hi"}``:

* ``floor``: benchmarks/floor_client.py (hand-written Trio + orjson JSON-RPC);
* ``ours``: ``turn.call`` through ``Supervisor.open`` (trusted server, so no approval;
  a fresh state dir in a temp dir): validation, trust decision, dispatch to the
  connection actor, envelope, audit row;
* ``ours-aio``: the same through ``supervisor.aio`` under ``asyncio.run`` (Trio a guest
  of the asyncio loop; each call awaited from an asyncio task, 64 asyncio tasks in flight);
* ``sdk-trio`` / ``sdk-asyncio``: the official ``mcp`` SDK's ``ClientSession`` over its
  ``stdio_client``, under ``anyio.run(..., backend=...)``.

Latency: ``--seq`` calls one after another, each timed with perf_counter (µs).
Throughput: ``--tput`` calls spread over ``--inflight`` tasks on one connection
(each task calls in a loop, so that many calls are in flight at all times).
Both phases also report the client process's CPU time per call (all its threads,
``time.process_time``), which other load on the machine disturbs far less than
wall-clock figures.

``--tracing MODE`` (ours): OpenTelemetry not importable, importable with no tracer
provider, or a ``BatchSpanProcessor`` over a no-op exporter (benchmarks/_tracing.py,
set up before the supervisor is imported); the answer says what the worker saw.

``--store-url URL`` (ours): the store on that PostgreSQL instead of SQLite in the
state dir (issue 34; run.py --store starts a throwaway cluster for it).

``--with-limits`` (ours): exposure lists and rate limits configured that every call
passes (``_common.LIMITED``); the answer says whether the code measured read them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import emit, ours_config, quantiles, quiet_logging, server_argv
from _tracing import MODES, Tracing

Call = Callable[[], Awaitable[Any]]


async def _measure(call: Call, args: argparse.Namespace, spawn: Callable[..., Any]) -> dict[str, Any]:
    """Warm up, time ``--seq`` sequential calls, then ``--tput`` calls with ``--inflight`` tasks."""
    for _ in range(args.warmup):
        await call()
    clock, cpu = time.perf_counter, time.process_time
    samples = []
    cpu_start = cpu()
    for _ in range(args.seq):
        start = clock()
        await call()
        samples.append((clock() - start) * 1e6)
    seq_cpu = (cpu() - cpu_start) / max(args.seq, 1) * 1e6
    per_task, extra = divmod(args.tput, args.inflight)

    async def worker(count: int) -> None:
        for _ in range(count):
            await call()

    start, cpu_start = clock(), cpu()
    await spawn(worker, [per_task + (1 if i < extra else 0) for i in range(args.inflight)])
    elapsed = clock() - start
    tput_cpu = (cpu() - cpu_start) / args.tput * 1e6
    return {
        "seq_us": quantiles(samples) if samples else None,
        "seq_cpu_us_per_call": seq_cpu,
        "tput_calls_s": args.tput / elapsed,
        "tput_s": elapsed,
        "tput_cpu_us_per_call": tput_cpu,
    }


# ------------------------------------------------------------------------ trio clients


async def _trio_spawn(worker: Callable[[int], Awaitable[None]], counts: list[int]) -> None:
    import trio

    async with trio.open_nursery() as nursery:
        for count in counts:
            nursery.start_soon(worker, count)


async def run_floor(args: argparse.Namespace) -> dict[str, Any]:
    import trio
    from floor_client import FloorClient

    async with trio.open_nursery() as nursery:
        client = await FloorClient.spawn(server_argv(), nursery)
        await client.handshake()

        async def call() -> Any:
            return await client.call("echo", {"text": "hi"})

        assert (await call())["content"][0]["text"] == "hi"
        result = await _measure(call, args, _trio_spawn)
        await client.aclose()
        nursery.cancel_scope.cancel()
    return result


async def run_ours(args: argparse.Namespace, tracing: Tracing | None = None) -> dict[str, Any]:
    from supervisor import Supervisor

    quiet_logging()
    config = ours_config([("bench", server_argv())], limited=args.with_limits, store_url=args.store_url)
    patches = [name for name in args.what_if.split(",") if name]
    if patches:
        import what_if

        what_if.prepare(patches)
    # Installed before the connection exists: it takes the transport's methods at start.
    io = _count_io() if args.count_io else None
    with tempfile.TemporaryDirectory(prefix="bench-ours-") as state_dir:
        async with Supervisor.open(config, state_dir=state_dir) as sup:
            if patches:
                what_if.apply(patches, sup)
            async with sup.session() as session:
                turn = await session.begin_turn()

                async def call() -> Any:
                    return await turn.call("bench_echo", {"text": "hi"})

                first = await call()
                assert first.ok and first.text == "hi", first
                if io is not None:
                    io.update(dict.fromkeys(io, 0))  # count the measured calls only
                if tracing is not None:
                    tracing.start()
                result = await _measure(call, args, _trio_spawn)
                result["audit"] = _store_stats(sup)
                result["store"] = "postgresql" if args.store_url else "sqlite"
                if args.with_limits:  # False: code from before issue 32 ignored them
                    result["limits_read"] = bool(getattr(sup.config, "limits", ()))
                if tracing is not None:
                    result["tracing"] = tracing.report(args.warmup + args.seq + args.tput)
                if io is not None:
                    result["io"] = dict(io)
    return result


async def run_ours_aio(args: argparse.Namespace) -> dict[str, Any]:
    """Ours through ``supervisor.aio``: an asyncio host, Trio its guest."""
    import asyncio

    from supervisor.aio import Supervisor

    async def spawn(worker: Callable[[int], Awaitable[None]], counts: list[int]) -> None:
        async with asyncio.TaskGroup() as group:
            for count in counts:
                group.create_task(worker(count))

    quiet_logging()
    config = ours_config([("bench", server_argv())])
    with tempfile.TemporaryDirectory(prefix="bench-aio-") as state_dir:
        async with Supervisor.open(config, state_dir=state_dir) as sup, sup.session() as session:
            turn = await session.begin_turn()

            async def call() -> Any:
                return await turn.call("bench_echo", {"text": "hi"})

            first = await call()
            assert first.ok and first.text == "hi", first
            return await _measure(call, args, spawn)


def _count_io() -> dict[str, int]:
    """Count the stdio transport's writes and reads (adds a little cost)."""
    from actors.transports import stdio

    counts = {"writes": 0, "writes_by_caller": 0, "reads": 0}
    send, receive = stdio.StdioTransport.send, stdio.StdioTransport.receive
    send_nowait = stdio.StdioTransport.send_nowait

    async def counted_send(self: Any, messages: Any) -> None:
        counts["writes"] += 1
        await send(self, messages)

    def counted_send_nowait(self: Any, messages: Any) -> bool:
        done = send_nowait(self, messages)
        # A lone call written at once by its caller (see WritePath.write_now); a write
        # the pipe took only in part is counted too (its rest goes with the next send).
        counts["writes"] += 1
        counts["writes_by_caller"] += 1
        return done

    async def counted_receive(self: Any) -> Any:
        counts["reads"] += 1
        return await receive(self)

    stdio.StdioTransport.send = counted_send  # type: ignore[method-assign]
    stdio.StdioTransport.send_nowait = counted_send_nowait  # type: ignore[method-assign]
    stdio.StdioTransport.receive = counted_receive  # type: ignore[method-assign]
    return counts


def _store_stats(sup: Any) -> dict[str, int]:
    stats = sup.store.statistics()
    return {"written": stats.written, "batches": stats.batches, "dropped": stats.dropped}


# ------------------------------------------------------------------------ the SDK


async def run_sdk(args: argparse.Namespace) -> dict[str, Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    argv = server_argv()
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        return await measure_sdk_session(session, args)


async def measure_sdk_session(
    session: Any, args: argparse.Namespace, *, discover: bool = False
) -> dict[str, Any]:
    """Initialize an SDK ``ClientSession`` (``discover``: adopt the 2026-07-28 era with
    ``server/discover`` instead), list, check one echo, then ``_measure``."""
    import anyio

    async def spawn(worker: Callable[[int], Awaitable[None]], counts: list[int]) -> None:
        async with anyio.create_task_group() as group:
            for count in counts:
                group.start_soon(worker, count)

    await (session.discover() if discover else session.initialize())
    await session.list_tools()

    async def call() -> Any:
        return await session.call_tool("echo", {"text": "hi"})

    first = await call()
    assert first.content[0].text == "hi", first
    return await _measure(call, args, spawn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--client", required=True, choices=["floor", "ours", "ours-aio", "sdk-trio", "sdk-asyncio"]
    )
    parser.add_argument("--seq", type=int, default=2000)
    parser.add_argument("--tput", type=int, default=10000)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument(
        "--what-if", default="", help="ours: comma-separated patches of benchmarks/what_if.py"
    )
    parser.add_argument(
        "--count-io", action="store_true", help="ours: count pipe writes and reads while measuring"
    )
    parser.add_argument(
        "--tracing",
        choices=MODES,
        help="ours: OpenTelemetry's setup (benchmarks/_tracing.py); default: as installed",
    )
    parser.add_argument(
        "--with-limits", action="store_true", help="ours: with exposure lists and rate limits it passes"
    )
    parser.add_argument("--store-url", help="ours: the store on this PostgreSQL (default: SQLite)")
    args = parser.parse_args()
    if (args.tracing or args.with_limits or args.store_url) and args.client != "ours":
        parser.error("--tracing, --with-limits, --store-url: ours only")
    if args.client.startswith("sdk"):
        import anyio

        backend = args.client.removeprefix("sdk-")
        result = anyio.run(run_sdk, args, backend=backend)
        result["backend"] = backend
    elif args.client == "ours-aio":
        import asyncio

        result = asyncio.run(run_ours_aio(args))
        result["backend"] = "asyncio (trio guest)"
    elif args.client == "floor":
        import trio

        result = trio.run(run_floor, args)
        result["backend"] = "trio"
    else:
        tracing = Tracing(args.tracing) if args.tracing else None  # before anything imports supervisor
        import trio

        result = trio.run(run_ours, args, tracing)
        result["backend"] = "trio"
        if tracing is not None:
            tracing.close()
    result["client"] = args.client + (f"+{args.what_if}" if args.what_if else "")
    result["with_limits"] = args.with_limits
    emit(result)


if __name__ == "__main__":
    sys.exit(main())
