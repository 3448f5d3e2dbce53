"""``bench_bridge.py``'s comparison: ours against supergateway's WebSocket mode in front
of the same server, and the floor (a bare WebSocket echo), each measured once per
call on a fresh server (``interleave.py`` runs the rounds). See ``bench_bridge.py``."""

from __future__ import annotations

import contextlib
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
BURST = 16  # concurrent opens of the burst measure (issue 37: ≥ 200 usable opens/s with warm: 2)


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


async def round_trip(rpc: Callable[[dict[str, Any]], Any], gateway_pid: int, calls: int) -> dict[str, Any]:
    """Sequential tools/call over one session, after 300 to warm up: their times, the
    client's CPU and the gateway process's (``serve``; supergateway's node) per call."""
    for i in range(1, 301):
        await rpc(call(i, "warm"))
    times = []
    c0, g0 = time.process_time(), cpu_s(gateway_pid)
    for i in range(calls):
        t0 = time.perf_counter()
        answer = await rpc(call(1000 + i, f"c{i}"))
        times.append((time.perf_counter() - t0) * 1e6)
        assert text_of(answer) == f"c{i}", answer
    return {
        "round_trip_us": quantiles(times),
        "client_cpu_us_per_call": round((time.process_time() - c0) * 1e6 / calls, 1),
        "gateway_cpu_us_per_call": round((cpu_s(gateway_pid) - g0) * 1e6 / calls, 1),
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


async def ours_round_trip(serve: Serve, calls: int) -> dict[str, Any]:
    """``round_trip`` over one session of a fresh ``serve``'s ``/v1/bridge``."""
    await serve.ready()
    async with ours_socket(serve.url) as ours:
        sid = await ours.open()
        await ours.initialize(sid)
        result = await round_trip(lambda m: ours.rpc(sid, m), serve.pid, calls)
        await ours.close(sid)
    return result


async def measure_ours(serve: Serve, calls: int, n: int, warm: int) -> dict[str, Any]:
    """One fresh ``serve``: the round trip, then ``n`` session opens one at a time and 16
    at a time; with ``warm`` spares on ``mini-warm``, the opens there too; and our
    WebSocket alone (connect, handshake, close; no session): what a supergateway
    "session" costs it, on our side."""
    result = await ours_round_trip(serve, calls)
    await serve.settled()
    for parallel in (1, 16):
        result[f"opens_{parallel}"] = await opens(serve.url, True, n, parallel)
        await serve.settled()
        if warm:  # each session taking a warm spare (and its keeper refilling)
            await trio.sleep(WARM_REFILL_S)  # the spares taken so far are replaced and started
            result[f"opens_warm_{parallel}"] = await opens(serve.url, True, n, parallel, "mini-warm")
            await serve.settled()
    if warm:  # a burst of 16 after a burst of 16: the pool keeps what a burst took
        await opens(serve.url, True, BURST, BURST, "mini-warm")
        await serve.settled()
        await trio.sleep(WARM_REFILL_S)
        result[f"opens_burst_{BURST}"] = await opens(serve.url, True, BURST, BURST, "mini-warm")
        await serve.settled()
    result["socket_only"] = await sockets_only(serve.url, n)
    return result


async def measure_supergateway(calls: int, n: int) -> dict[str, Any]:
    """One fresh supergateway (``--outputTransport ws``): the round trip, then ``n``
    socket opens (its "session") one at a time and 16 at a time."""
    launcher, why = supergateway()
    if launcher is None:
        return {"error": why}
    async with supergateway_running(launcher) as (url, pid), open_websocket_url(url) as ws:
        plain = Plain(ws)
        await plain.initialize()
        result = await round_trip(plain.rpc, pid, calls)
        for parallel in (1, 16) if n else ():  # n = 0: the round trip alone
            result[f"opens_{parallel}"] = await opens(url, False, n, parallel)
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


async def measure_echo(stack: str, calls: int) -> dict[str, Any]:
    """A tools/call-sized message echoed by a fresh bare WebSocket server of ``stack``:
    the web stack's own share of a round trip (no bridge, no envelope, no child)."""
    text = orjson.dumps(
        {"v": 1, "type": "mcp:message", "data": {"sessionId": "x" * 16, "jsonrpc": call(7, "r0c0")}}
    ).decode()
    times = []
    async with echo_running(stack) as url, open_websocket_url(url) as ws:
        for _ in range(300):  # warm-up
            await ws.send_message(text)
            await ws.get_message()
        for _ in range(calls):
            t0 = time.perf_counter()
            await ws.send_message(text)
            orjson.loads(await ws.get_message())
            times.append((time.perf_counter() - t0) * 1e6)
    return {"us": quantiles(times)}


async def sockets_only(url: str, n: int) -> dict[str, Any]:
    durations = []
    began = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        async with ours_socket(url):
            durations.append((time.perf_counter() - t0) * 1000)
    return {"n": n, "connect_ms": quantiles(durations), "per_s": round(n / (time.perf_counter() - began), 1)}
