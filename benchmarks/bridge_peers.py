"""``bench_bridge.py``'s comparison: ours against supergateway's WebSocket mode in front
of the same server, and the floor (a bare WebSocket echo). See ``bench_bridge.py``."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import trio
from trio_websocket import HandshakeError, WebSocketConnection, open_websocket_url

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import peers  # noqa: E402
from _bridge import INIT, SERVER, Serve, call, ours_socket, pong_race, text_of  # noqa: E402
from _common import free_port, quantiles  # noqa: E402

# ------------------------------------------------------------ against supergateway

WARM_REFILL_S = 2.0


class Plain:
    """A supergateway connection: JSON-RPC messages as WebSocket text, nothing around them."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws

    async def rpc(self, message: dict[str, Any]) -> dict[str, Any]:
        await self.ws.send_message(orjson.dumps(message).decode())
        while True:
            answer: dict[str, Any] = orjson.loads(await self.ws.get_message())
            if answer.get("id") == message["id"] and "method" not in answer:
                return answer

    async def initialize(self) -> None:
        await self.rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        await self.ws.send_message(
            orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).decode()
        )


def supergateway() -> tuple[str | None, str]:
    """The launcher's path (``peers.py`` installs it, the one place every benchmark's
    peers come from), or None and why not."""
    try:
        return str(peers.npm_peer("supergateway")), ""
    except peers.Unavailable as exc:
        return None, str(exc)


async def listening(url: str) -> None:
    """Wait (up to 20 s) until a WebSocket server takes connections at ``url``."""
    for _ in range(400):
        try:
            async with open_websocket_url(url):
                return
        except (OSError, HandshakeError):  # not listening yet
            await trio.sleep(0.05)
        except BaseException as exc:
            if pong_race(exc):
                return  # it answered: it listens
            raise
    raise RuntimeError(f"nothing listens at {url} after 20 s")


@asynccontextmanager
async def supergateway_running(launcher: str) -> AsyncIterator[tuple[str, int]]:
    port = free_port()
    command = [launcher, "--stdio", " ".join(SERVER), "--outputTransport", "ws", "--port", str(port)]
    command += ["--logLevel", "none"]
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"ws://127.0.0.1:{port}/message"
    try:
        await listening(url)
        yield url, process.pid
    finally:
        with trio.CancelScope(shield=True):
            for sig in (signal.SIGTERM, signal.SIGKILL):  # it may wait for its child: then kill
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sig)
                with trio.move_on_after(3):
                    await process.wait()
                    break


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def round_trips(
    serve: Serve, sg_url: str | None, sg_pid: int | None, calls: int, rounds: int
) -> dict[str, Any]:
    """Sequential tools/call over one session of each, alternating in rounds; the
    client's CPU and the gateway process's (``serve``; supergateway's node) per call."""
    times: dict[str, list[float]] = {"ours": [], "supergateway": []}
    cpu: dict[str, float] = {"ours": 0.0, "supergateway": 0.0}
    gateway_cpu: dict[str, float] = {"ours": 0.0, "supergateway": 0.0}
    gateway_pid = {"ours": serve.pid, "supergateway": sg_pid or 0}
    async with contextlib.AsyncExitStack() as stack:
        ours = await stack.enter_async_context(ours_socket(serve.url))
        sid = await ours.open()
        await ours.initialize(sid)
        plain = None
        if sg_url is not None:
            plain = Plain(await stack.enter_async_context(open_websocket_url(sg_url)))
            await plain.initialize()
        clients: dict[str, Callable[[dict[str, Any]], Any]] = {"ours": lambda m: ours.rpc(sid, m)}
        if plain is not None:
            clients["supergateway"] = plain.rpc
        for rpc in clients.values():  # warm-up
            for i in range(1, 301):
                await rpc(call(i, "warm"))
        for r in range(rounds):
            for name, rpc in clients.items():
                c0, g0 = time.process_time(), cpu_s(gateway_pid[name])
                for i in range(calls):
                    message = call(1000 + r * calls + i, f"r{r}c{i}")
                    t0 = time.perf_counter()
                    answer = await rpc(message)
                    times[name].append((time.perf_counter() - t0) * 1e6)
                    assert text_of(answer) == f"r{r}c{i}", answer
                cpu[name] += time.process_time() - c0
                gateway_cpu[name] += cpu_s(gateway_pid[name]) - g0
        await ours.close(sid)
    return {
        name: {
            "us": quantiles(v),
            "client_cpu_us_per_call": round(cpu[name] * 1e6 / len(v), 1),
            "gateway_cpu_us_per_call": round(gateway_cpu[name] * 1e6 / len(v), 1),
        }
        for name, v in times.items()
        if v
    }


async def opens(url: str, ours: bool, n: int, parallel: int, server: str = "mini") -> dict[str, Any]:
    """``n`` usable sessions (opened, initialize answered), ``parallel`` at a time; each
    closed after (not timed). ``server``: ours only (``mini-warm`` keeps warm spares)."""
    durations: list[float] = []
    steps: dict[str, list[float]] = {"connect": [], "open_result": [], "initialize": []}
    limiter = trio.CapacityLimiter(parallel)

    async def one(index: int) -> None:
        async with limiter:
            t0 = time.perf_counter()
            if ours:
                async with ours_socket(url) as client:
                    t1 = time.perf_counter()
                    sid = await client.open(index, server)
                    t2 = time.perf_counter()
                    await client.initialize(sid)
                    for step, took in zip(steps, (t1 - t0, t2 - t1, time.perf_counter() - t2), strict=True):
                        steps[step].append(took * 1000)
                    durations.append(time.perf_counter() - t0)
                    await client.close(sid)
            else:
                async with open_websocket_url(url) as ws:
                    await Plain(ws).initialize()
                    durations.append(time.perf_counter() - t0)

    began = time.perf_counter()
    with trio.fail_after(60 + n):
        async with trio.open_nursery() as nursery:
            for index in range(n):
                nursery.start_soon(one, index)
    elapsed = time.perf_counter() - began
    result = {
        "n": n,
        "parallel": parallel,
        "open_ms": quantiles([d * 1000 for d in durations]),
        "opens_per_s": round(n / elapsed, 1),
    }
    if ours:
        result["p50_ms_of"] = {step: round(quantiles(v)["p50"], 2) for step, v in steps.items()}
    return result


async def run_peer(serve: Serve, args: argparse.Namespace) -> dict[str, Any]:
    launcher, why = supergateway()
    result: dict[str, Any] = {"supergateway": launcher or f"skipped: {why}"}
    async with contextlib.AsyncExitStack() as stack:
        sg_url, sg_pid = None, None
        if launcher is not None:
            sg_url, sg_pid = await stack.enter_async_context(supergateway_running(launcher))
        result["round_trip"] = await round_trips(serve, sg_url, sg_pid, args.calls, args.rounds)
        print(json.dumps(result["round_trip"]), file=sys.stderr)
        await serve.settled()
        for parallel in (1, 16):
            for name, url in (("ours", serve.url), ("supergateway", sg_url)):
                if url is not None:
                    result[f"opens_{name}_{parallel}"] = await opens(
                        url, name == "ours", args.opens, parallel
                    )
                    await serve.settled()
            if args.warm:  # ours again, each session taking a warm spare (and its keeper refilling)
                await trio.sleep(WARM_REFILL_S)  # the spares taken so far are replaced and started
                result[f"opens_ours_warm_{parallel}"] = await opens(
                    serve.url, True, args.opens, parallel, "mini-warm"
                )
                await serve.settled()
        # Our WebSocket alone (connect, handshake, close; no session): what a supergateway
        # "session" costs it, on our side.
        result["ours_socket_only"] = await sockets_only(serve.url, args.opens)
    return result


@asynccontextmanager
async def echo_running(stack: str) -> AsyncIterator[str]:
    port = free_port()
    command = [sys.executable, str(HERE / "ws_echo_server.py"), stack, str(port)]
    process = await trio.lowlevel.open_process(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"ws://127.0.0.1:{port}/echo"
    try:
        await listening(url)
        yield url
    finally:
        process.kill()
        await process.wait()


async def run_floor(calls: int, rounds: int) -> dict[str, Any]:
    """A tools/call-sized message echoed by a bare WebSocket server: the web stack's own
    share of a round trip (no bridge, no envelope, no child)."""
    text = orjson.dumps(
        {"v": 1, "type": "mcp:message", "data": {"sessionId": "x" * 16, "jsonrpc": call(7, "r0c0")}}
    )
    times: dict[str, list[float]] = {"quart": [], "hypercorn": [], "trio-websocket": []}
    async with contextlib.AsyncExitStack() as stack:
        sockets = {}
        for name in times:
            url = await stack.enter_async_context(echo_running(name))
            sockets[name] = await stack.enter_async_context(open_websocket_url(url))
        for _ in range(rounds):
            for name, ws in sockets.items():
                for _ in range(calls):
                    t0 = time.perf_counter()
                    await ws.send_message(text.decode())
                    orjson.loads(await ws.get_message())
                    times[name].append((time.perf_counter() - t0) * 1e6)
    return {f"echo_{name}": {"us": quantiles(v)} for name, v in times.items()}


async def sockets_only(url: str, n: int) -> dict[str, Any]:
    durations = []
    began = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        async with ours_socket(url):
            durations.append((time.perf_counter() - t0) * 1000)
    return {"n": n, "connect_ms": quantiles(durations), "per_s": round(n / (time.perf_counter() - began), 1)}
