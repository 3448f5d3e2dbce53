"""Worker: SIGKILL of a server → answer of its last in-flight call; reconnect to steady.

    python benchmarks/bench_kill.py --client ours|floor|sdk [--kills N] [--inflight K]

One kill: the server is frozen with SIGSTOP (so nothing it was asked gets answered),
K calls are sent and confirmed in flight, then the server gets SIGKILL; we time from
``os.kill`` to the moment the last of the K calls returned (with an error, as it
must). Then the connection comes back and we go again:

* ours: the supervisor reconnects by itself (reconnect schedule ``[0]``); we also
  time SIGKILL → the server steady again (re-listed, available to calls);
* floor / sdk: a fresh connection is opened (spawn, initialize, tools/list), which
  we time as their reconnect: the least any client could spend.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from typing import Any

from _common import (
    child_pids,
    emit,
    ours_config,
    quantiles,
    quiet_logging,
    server_argv,
    server_pid,
    wait_steady,
)

FREEZE_SETTLE_S = 0.005  # after the calls are in flight: let the writer flush them


async def ours(kills: int, inflight: int) -> dict[str, Any]:
    import trio

    from supervisor import Supervisor

    quiet_logging()
    answer_ms: list[float] = []
    steady_ms: list[float] = []
    codes: dict[str, int] = {}
    config = ours_config([("k", server_argv())], eager=True)
    with tempfile.TemporaryDirectory(prefix="bench-kill-") as state_dir:
        async with Supervisor.open(config, state_dir=state_dir) as sup, sup.session() as session:
            await wait_steady(sup, ["k"])
            cold_start = time.perf_counter()
            for _ in range(kills):
                await wait_steady(sup, ["k"])
                turn = await session.begin_turn()
                pid = await server_pid(sup, "k")
                generation = sup.servers()["k"].generation
                os.kill(pid, signal.SIGSTOP)
                returned: list[float] = []

                async def call(turn: Any = turn, returned: list[float] = returned) -> None:
                    envelope = await turn.call("k_echo", {"text": "hi"})
                    returned.append(time.perf_counter())
                    code = envelope.error.code if envelope.error else "ok"
                    codes[code] = codes.get(code, 0) + 1

                async with trio.open_nursery() as nursery:
                    for _ in range(inflight):
                        nursery.start_soon(call)
                    # Poll (no event exists for this): the calls are in the actor's table.
                    while (status := await sup.connection_status("k")) is None or status.in_flight < inflight:  # noqa: ASYNC110
                        await trio.sleep(0.0005)
                    await trio.sleep(FREEZE_SETTLE_S)
                    killed = time.perf_counter()
                    os.kill(pid, signal.SIGKILL)
                answer_ms.append((max(returned) - killed) * 1000)
                await wait_steady(sup, ["k"], newer_than={"k": generation})
                steady_ms.append((time.perf_counter() - killed) * 1000)
            total_s = time.perf_counter() - cold_start
    return {
        "client": "ours",
        "answer_ms": quantiles(answer_ms),
        "reconnect_ms": quantiles(steady_ms),
        "codes": codes,
        "total_s": total_s,
    }


async def floor(kills: int, inflight: int) -> dict[str, Any]:
    import trio
    from floor_client import ConnectionLost, FloorClient

    answer_ms: list[float] = []
    connect_ms: list[float] = []
    codes: dict[str, int] = {}
    async with trio.open_nursery() as nursery:
        for _ in range(kills):
            started = time.perf_counter()
            client = await FloorClient.spawn(server_argv(), nursery)
            await client.handshake()
            connect_ms.append((time.perf_counter() - started) * 1000)
            returned: list[float] = []

            async def call(client: FloorClient = client, returned: list[float] = returned) -> None:
                try:
                    await client.call("echo", {"text": "hi"})
                    code = "ok"
                except ConnectionLost:
                    code = "lost"
                returned.append(time.perf_counter())
                codes[code] = codes.get(code, 0) + 1

            os.kill(client.process.pid, signal.SIGSTOP)
            async with trio.open_nursery() as calls:
                for _ in range(inflight):
                    calls.start_soon(call)
                await trio.sleep(FREEZE_SETTLE_S)
                killed = time.perf_counter()
                os.kill(client.process.pid, signal.SIGKILL)
            answer_ms.append((max(returned) - killed) * 1000)
            await client.process.wait()
        nursery.cancel_scope.cancel()
    return {
        "client": "floor",
        "answer_ms": quantiles(answer_ms),
        "reconnect_ms": quantiles(connect_ms),
        "codes": codes,
    }


async def sdk(kills: int, inflight: int) -> dict[str, Any]:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    argv = server_argv()
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    answer_ms: list[float] = []
    connect_ms: list[float] = []
    codes: dict[str, int] = {}
    for _ in range(kills):
        started = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            connect_ms.append((time.perf_counter() - started) * 1000)
            (pid,) = child_pids()
            returned: list[float] = []

            async def call(returned: list[float] = returned) -> None:
                try:
                    await session.call_tool("echo", {"text": "hi"})
                    code = "ok"
                except Exception as exc:  # the SDK raises MCPError on a closed connection
                    code = type(exc).__name__
                returned.append(time.perf_counter())
                codes[code] = codes.get(code, 0) + 1

            os.kill(pid, signal.SIGSTOP)
            with anyio.move_on_after(10):
                async with anyio.create_task_group() as group:
                    for _ in range(inflight):
                        group.start_soon(call)
                    await anyio.sleep(FREEZE_SETTLE_S)
                    killed = time.perf_counter()
                    os.kill(pid, signal.SIGKILL)
            answer_ms.append((max(returned, default=killed + 10) - killed) * 1000)
    return {
        "client": "sdk",
        "answer_ms": quantiles(answer_ms),
        "reconnect_ms": quantiles(connect_ms),
        "codes": codes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", required=True, choices=["ours", "floor", "sdk"])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--inflight", type=int, default=4)
    args = parser.parse_args()
    if args.client == "sdk":
        import anyio

        result = anyio.run(sdk, args.kills, args.inflight, backend="trio")
    else:
        import trio

        result = trio.run(ours if args.client == "ours" else floor, args.kills, args.inflight)
    result["kills"] = args.kills
    result["inflight"] = args.inflight
    emit(result)


if __name__ == "__main__":
    sys.exit(main())
