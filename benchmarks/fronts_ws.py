"""``bench_fronts.py``'s ``supergateway-ws`` row: supergateway's WebSocket mode reached
with a raw client (JSON-RPC messages as WebSocket text, nothing around them), measured
like every other row: sequential p50/p99, calls/s over ``sessions`` sockets, and the
correctness checks (progress, a leak to another socket, cancel reaching the backend, a
SIGKILLed backend). supergateway shares one child among every socket and rewrites each
request id to route answers back, so a "session" here is a socket."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import trio
from _common import quantiles
from bridge_peers import listening
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}


class Raw:
    """One socket: requests out, their answers matched by id; everything else kept."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.other: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send_message(orjson.dumps(message).decode())

    async def rpc(
        self, method: str, params: dict[str, Any], on_other: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        request_id = next(self.ids)
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            answer: dict[str, Any] = orjson.loads(await self.ws.get_message())
            if answer.get("id") == request_id and "method" not in answer:
                return answer
            self.other.append(answer)
            if on_other is not None:
                on_other(answer)

    async def call(
        self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        return await self.rpc("tools/call", params)


@contextlib.asynccontextmanager
async def raw_session(url: str) -> AsyncIterator[Raw]:
    async with open_websocket_url(url) as ws:
        raw = Raw(ws)
        await raw.rpc("initialize", INIT)
        await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield raw


async def measure_ws(front: Any, calls: int, sessions: int, seconds: float, checks: bool) -> dict[str, Any]:
    """The row (``front`` is bench_fronts' Front: its ``url``, ``seen``, ``backend_pids``)."""
    url = front.url
    await listening(url)  # its port may take TCP connections before its WebSocket handshakes
    result: dict[str, Any] = {}
    async with raw_session(url) as raw:
        for _ in range(30):
            await raw.call("echo", {"text": "warm"})
        times = []
        for i in range(calls):
            began = time.perf_counter()
            answer = await raw.call("echo", {"text": f"call {i}"})
            times.append((time.perf_counter() - began) * 1000)
            assert answer["result"]["content"][0]["text"] == f"call {i}", answer
        result["sequential_ms"] = quantiles(times)
    result["calls_per_s"] = await _throughput(url, sessions, seconds)
    if checks:
        result.update(await _correctness(front))
    return result


async def _throughput(url: str, sessions: int, seconds: float) -> float:
    done, opened, ready, began = [0], [0], trio.Event(), [0.0]

    async def one() -> None:
        async with raw_session(url) as raw:
            opened[0] += 1
            if opened[0] == sessions:
                began[0] = time.perf_counter()
                ready.set()
            await ready.wait()
            end = began[0] + seconds
            while time.perf_counter() < end:
                await raw.call("echo", {"text": "x"})
                done[0] += 1

    async with trio.open_nursery() as nursery:
        for _ in range(sessions):
            nursery.start_soon(one)
    return done[0] / max(time.perf_counter() - began[0], 1e-9)


async def _correctness(front: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    leaked: list[str] = []

    def listen(message: dict[str, Any]) -> None:
        if message.get("method") == "notifications/progress":
            leaked.append("progress")

    async with raw_session(front.url) as client, raw_session(front.url) as bystander:
        async with trio.open_nursery() as nursery:
            # The bystander waits on a slow call of its own, reading whatever it is sent.
            nursery.start_soon(
                lambda: bystander.rpc("tools/call", {"name": "sleep", "arguments": {"seconds": 1.5}}, listen)
            )
            await trio.sleep(0.1)
            with trio.move_on_after(15):
                await client.call("progress", {"steps": 3, "interval": 0.02}, {"progressToken": "p1"})
            steps = [
                m["params"]["progress"] for m in client.other if m.get("method") == "notifications/progress"
            ]
            out["progress"] = steps == [1, 2, 3]
        out["progress_reaches_other_session"] = bool(leaked)

        # A 2 s call cancelled at 0.3 s: the backend drops a cancelled call unanswered,
        # so an answer at 2 s means the cancel named some other request (an id the
        # gateway rewrote) even though a cancel arrived.
        cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}
        answered_anyway = False
        with trio.move_on_after(0.3):
            await client.rpc("tools/call", {"name": "sleep", "arguments": {"seconds": 2}})
        cancelled["params"]["requestId"] = next(client.ids) - 1
        await client.send(cancelled)
        with trio.move_on_after(2.5):
            while not answered_anyway:
                answer = orjson.loads(await client.ws.get_message())
                answered_anyway = answer.get("id") == cancelled["params"]["requestId"]
        out["cancel_reaches_backend"] = front.seen("notifications/cancelled") and not answered_anyway
        out["cancel_note"] = "answered anyway (the id was rewritten)" if answered_anyway else ""
    out.update(await _kill(front))
    return out


async def kill_mid_call(front: Any, call: Callable[[], Awaitable[str]], out: dict[str, Any]) -> float:
    """SIGKILL ``front``'s backend 0.5 s into ``call`` (a 30 s call; it returns what the
    front answered, in words): ``out`` gets the answer and how long it took to come
    (none within 15 s: None). Shared by every row; returns when the kill was sent."""
    out.update({"kill_answer_ms": None, "kill_answer": "none within 15 s"})
    answered = trio.Event()

    async def calling() -> None:
        out["kill_answer"] = await call()
        answered.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(calling)
        await trio.sleep(0.5)
        pids = front.backend_pids()
        killed = time.perf_counter()
        for pid in pids:
            front.kill(pid)
        with trio.move_on_after(15):
            await answered.wait()
            out["kill_answer_ms"] = (time.perf_counter() - killed) * 1000
        nursery.cancel_scope.cancel()
    return killed


async def _kill(front: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"recovered_s": None}
    killed = time.perf_counter()
    try:
        async with raw_session(front.url) as raw:

            async def call() -> str:
                try:
                    reply = await raw.call("sleep", {"seconds": 30})
                except ConnectionClosed as exc:
                    return f"socket closed ({exc.reason.code if exc.reason else '?'})"
                return "error" if "error" in reply or reply.get("result", {}).get("isError") else "result"

            killed = await kill_mid_call(front, call, out)
    except (ConnectionClosed, OSError) as exc:
        out["kill_answer"] = f"session broke: {type(exc).__name__}"
    alive = front.process is not None and front.process.poll() is None
    out["recover_error"] = "the gateway exited" if not alive else "a new socket's call failed"
    if alive:
        with trio.move_on_after(10), contextlib.suppress(ConnectionClosed, OSError):
            async with raw_session(front.url) as raw:
                reply = await raw.call("echo", {"text": "back?"})
                if "result" in reply:
                    out["recovered_s"] = round(time.perf_counter() - killed, 2)
    return out
