"""Worker: SIGKILL of a server → answer of its last in-flight call; reconnect to steady.

    python benchmarks/bench_kill.py --client ours|floor|sdk|ours-http [--kills N] [--inflight K]
                                    [--resumable] [--protocol auto|2025-11-25|2026-07-28]

One kill: the server is frozen with SIGSTOP (so nothing it was asked gets answered),
K calls are sent and confirmed in flight, then the server gets SIGKILL; we time from
``os.kill`` to the moment the last of the K calls returned (with an error, as it
must). Then the connection comes back and we go again:

* ours: the supervisor reconnects by itself (reconnect schedule ``[0]``); we also
  time SIGKILL → the server steady again (re-listed, available to calls);
* floor / sdk: a fresh connection is opened (spawn, initialize, tools/list), which
  we time as their reconnect: the least any client could spend.

* ours-http: a remote server over Streamable HTTP, the official SDK's own stack
  (``tests/servers/sdk_server.py --http PORT``, uvicorn) in a process of its own. Not
  frozen: the K calls (its ``sleep`` tool) are running at the server, each has
  reported progress on its open answer stream, when it gets SIGKILL. ``--resumable``:
  the server keeps an event store, so its streams carry event ids and the client
  would resume them. The server is started again after each kill (that start, about
  a second of imports, is no reconnect time of ours, so none is reported).
  ``--protocol`` pins the server's era (``2026-07-28``: the per-request era, which
  ``auto`` finds with the SDK 2.3 server; ``2025-11-25``: the handshake era).
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
import tempfile
import time
from typing import Any

from _common import (
    PYTHON,
    ROOT,
    child_pids,
    emit,
    free_port,
    ours_config,
    quantiles,
    quiet_logging,
    server_argv,
    server_pid,
    wait_steady,
)

FREEZE_SETTLE_S = 0.005  # after the calls are in flight: let the writer flush them
SDK_SERVER = ROOT / "tests" / "servers" / "sdk_server.py"


async def timed_call(
    turn: Any,
    tool: str,
    arguments: dict[str, Any],
    returned: list[float],
    codes: dict[str, int],
    **options: Any,
) -> None:
    """One call of ours: when it returned goes to ``returned``, its outcome to ``codes``."""
    envelope = await turn.call(tool, arguments, **options)
    returned.append(time.perf_counter())
    code = envelope.error.code if envelope.error else "ok"
    codes[code] = codes.get(code, 0) + 1


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
                call = functools.partial(timed_call, turn, "k_echo", {"text": "hi"}, returned, codes)
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


async def ours_http(kills: int, inflight: int, resumable: bool, protocol: str = "auto") -> dict[str, Any]:
    from actors.spec import ServerSpec, Start
    from supervisor import Supervisor
    from supervisor.settings.model import Config

    quiet_logging()
    port = free_port()
    argv = [PYTHON, str(SDK_SERVER), "--http", str(port), *(["--resumable"] if resumable else [])]
    spec = ServerSpec(
        name="k",
        type="remote",
        url=f"http://127.0.0.1:{port}/mcp",
        transport="streamable-http",
        trusted=True,
        start=Start.EAGER,
        reconnect_schedule_s=(0.05,),  # while the server starts again
        shutdown_grace_s=0.5,
        protocol=protocol,
    )
    answer_ms: list[float] = []
    codes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-kill-http-") as state_dir:
        config = Config(servers=(spec,))
        async with Supervisor.open(config, state_dir=state_dir) as sup, sup.session() as session:
            for _ in range(kills):
                answer_ms.append(await _one_http_kill(sup, session, argv, inflight, codes))
    return {
        "client": "ours-http"
        + ("-resumable" if resumable else "")
        + ("" if protocol == "auto" else f"-{protocol}"),
        "answer_ms": quantiles(answer_ms),
        "reconnect_ms": None,
        "codes": codes,
    }


async def _one_http_kill(
    sup: Any, session: Any, argv: list[str], inflight: int, codes: dict[str, int]
) -> float:
    """Start the server, wait for a fresh steady connection, run ``inflight`` calls
    until each reported progress, SIGKILL the server: ms to the last answer."""
    import subprocess

    import trio

    from actors.protocol.session import ProgressReceived

    generation = sup.servers()["k"].generation
    server = await trio.lowlevel.open_process(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with trio.fail_after(60):
            await wait_steady(sup, ["k"], newer_than={"k": generation})
        turn = await session.begin_turn()
        progress_send, progress_receive = trio.open_memory_channel[ProgressReceived](inflight)
        returned: list[float] = []
        call = functools.partial(
            timed_call, turn, "k_sleep", {"seconds": 60}, returned, codes, progress=progress_send
        )
        async with trio.open_nursery() as nursery:
            for _ in range(inflight):
                nursery.start_soon(call)
            with trio.fail_after(30):
                for _ in range(inflight):  # each call is running at the server
                    await progress_receive.receive()
            killed = time.perf_counter()
            server.kill()
        return (max(returned) - killed) * 1000
    finally:
        server.kill()
        await server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", required=True, choices=["ours", "floor", "sdk", "ours-http"])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--inflight", type=int, default=4)
    parser.add_argument("--resumable", action="store_true", help="ours-http: streams carry event ids")
    parser.add_argument("--protocol", default="auto", choices=["auto", "2025-11-25", "2026-07-28"])
    args = parser.parse_args()
    if args.client == "ours-http":
        import trio

        result = trio.run(ours_http, args.kills, args.inflight, args.resumable, args.protocol)
    elif args.client == "sdk":
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
