"""The MCP gateway at counts the tests keep small: ``/mcp`` of a real ``serve``.

    python benchmarks/bench_gateway.py [--cycles 2000] [--sessions 200] [--calls 5]
                                       [--kill-clients 10] [--kill-calls 10]

``serve`` runs as a subprocess on a free loopback port over two mini_server.py
backends: ``echo`` (shared by every session) and ``own`` (``scope: session``: a process
per MCP session). The client is raw HTTP (httpx2 on Trio), so what is measured is the
gateway, not a client library:

* **cycles**: open a session (initialize + initialized), call ``own_echo`` (its process
  spawns), ``DELETE``, sequentially; then the processes left under ``serve`` (must be
  the shared one only) and ``serve``'s descriptors and RSS before and after.
* **sessions**: that many sessions open at once (each spawns its own ``own`` server,
  so this is also a spawn storm), each making ``--calls`` calls to ``echo_echo`` with a
  text naming the session and call; mis-routes (an answer with another session's text)
  and the per-call latency.
* **kill**: ``--kill-clients`` sessions with ``--kill-calls`` 30-second ``echo_sleep``
  calls each in flight; the shared server is SIGKILLed; the time until every call is
  answered (against their 60 s ``call_timeout_ms``), how many answered ``unavailable``,
  and the time until a new call succeeds (the reconnect schedule's first step, 1 s).

Prints one JSON object; ``benchmarks/RESULTS.md`` keeps the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import trio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _common import descendants, fds_and_rss, quantiles, serve_running  # noqa: E402

MINI = str(ROOT / "tests" / "servers" / "mini_server.py")
ACCEPT = "application/json, text/event-stream"
VERSION = "2025-11-25"


def config(port: int) -> dict[str, Any]:
    server = {"command": [sys.executable, MINI], "trusted": True, "call_timeout_ms": 60_000}
    return {
        "admin": {"bind": f"127.0.0.1:{port}"},
        "tool_search": {"enabled": False},
        "servers": {"echo": {**server, "start": "eager"}, "own": {**server, "scope": "session"}},
    }


def shared_server(serve_pid: int) -> int:
    """The one mini_server.py under ``serve`` when no session is open."""
    left = [
        pid for pid in descendants(serve_pid) if b"mini_server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(left) == 1, f"besides the shared server, {len(left) - 1} left: {left}"
    return left[0]


class Session:
    """One ``/mcp`` session over a shared client."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.id: str | None = None
        self.ids = 0

    def headers(self) -> dict[str, str]:
        headers = {"Accept": ACCEPT}
        if self.id is not None:
            headers |= {"Mcp-Session-Id": self.id, "MCP-Protocol-Version": VERSION}
        return headers

    async def open(self) -> None:
        params = {
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        }
        reply = await self.client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params},
            headers=self.headers(),
        )
        reply.raise_for_status()
        self.id = reply.headers["mcp-session-id"]
        note = await self.client.post(
            "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers()
        )
        assert note.status_code == 202, note.text

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        message = {
            "jsonrpc": "2.0",
            "id": self.ids,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        headers = {**self.headers(), "Accept": "application/json"}
        reply = await self.client.post("/mcp", json=message, headers=headers)
        reply.raise_for_status()
        answer: dict[str, Any] = reply.json()
        return answer

    async def close(self) -> None:
        reply = await self.client.delete("/mcp", headers=self.headers())
        assert reply.status_code in (200, 204), reply.text


def text_of(answer: dict[str, Any]) -> str:
    result = answer.get("result") or {}
    return "".join(item.get("text", "") for item in result.get("content", []))


async def run_cycles(client: httpx.AsyncClient, serve_pid: int, cycles: int) -> dict[str, Any]:
    async def cycle(i: int) -> None:
        session = Session(client)
        await session.open()
        answer = await session.call("own_echo", {"text": f"c{i}"})
        assert text_of(answer) == f"c{i}", answer
        await session.close()

    for i in range(10):
        await cycle(i)
    await trio.sleep(1)
    fds_before, rss_before = fds_and_rss(serve_pid)
    durations = []
    began = time.perf_counter()
    for i in range(cycles):
        start = time.perf_counter()
        await cycle(i)
        durations.append((time.perf_counter() - start) * 1000)
    elapsed = time.perf_counter() - began
    await trio.sleep(2)  # the last session's server is reaped
    fds_after, rss_after = fds_and_rss(serve_pid)
    return {
        "cycles": cycles,
        "cycle_ms": quantiles(durations),
        "cycles_per_s": round(cycles / elapsed, 1),
        "processes_left": len(descendants(serve_pid)) - 1,  # the shared echo server stays
        "fds": [fds_before, fds_after],
        "rss_kb": [rss_before, rss_after],
    }


async def run_sessions(client: httpx.AsyncClient, sessions: int, calls: int) -> dict[str, Any]:
    latencies: list[float] = []
    misrouted = 0
    failed = 0

    async def one(n: int) -> None:
        nonlocal misrouted, failed
        session = Session(client)
        await session.open()
        for k in range(calls):
            start = time.perf_counter()
            answer = await session.call("echo_echo", {"text": f"s{n}-{k}"})
            latencies.append((time.perf_counter() - start) * 1000)
            text = text_of(answer)
            if not text:
                failed += 1
            elif text != f"s{n}-{k}":
                misrouted += 1
        await session.close()

    began = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for n in range(sessions):
            nursery.start_soon(one, n)
    elapsed = time.perf_counter() - began
    return {
        "sessions": sessions,
        "calls": sessions * calls,
        "misrouted": misrouted,
        "failed": failed,
        "call_ms": quantiles(latencies),
        "calls_per_s": round(sessions * calls / elapsed, 1),
    }


async def run_kill(client: httpx.AsyncClient, serve_pid: int, clients: int, calls: int) -> dict[str, Any]:
    victim = shared_server(serve_pid)  # before the sessions open: each spawns its own
    sessions = [Session(client) for _ in range(clients)]
    for session in sessions:
        await session.open()
    codes: list[str] = []
    answered_at: list[float] = []

    async def slow(session: Session) -> None:
        answer = await session.call("echo_sleep", {"seconds": 30})
        answered_at.append(time.perf_counter())
        error = ((answer.get("result") or {}).get("_meta") or {}).get("mcp-supervisor/error") or {}
        codes.append(error.get("code", "ok"))

    async with trio.open_nursery() as nursery:
        for session in sessions:
            for _ in range(calls):
                nursery.start_soon(slow, session)
        await trio.sleep(1.0)  # every call is in flight
        killed = time.perf_counter()
        os.kill(victim, signal.SIGKILL)
    all_answered_ms = (max(answered_at) - killed) * 1000
    began = time.perf_counter()
    while True:
        answer = await sessions[0].call("echo_echo", {"text": "back"})
        if text_of(answer) == "back":
            break
        await trio.sleep(0.05)
    healthy_ms = (time.perf_counter() - began) * 1000
    for session in sessions:
        await session.close()
    return {
        "calls_in_flight": clients * calls,
        "all_answered_ms": round(all_answered_ms, 1),
        "outcomes": {code: codes.count(code) for code in sorted(set(codes))},
        "next_call_ok_after_ms": round(healthy_ms, 1),
    }


async def measure(args: argparse.Namespace, port: int, serve_pid: int) -> dict[str, Any]:
    most = args.sessions + 16
    limits = httpx.Limits(max_connections=most, max_keepalive_connections=most)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120, limits=limits) as client:
        for _ in range(200):
            try:
                if (await client.get("/v1/health")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            await trio.sleep(0.05)
        results: dict[str, Any] = {}
        results["cycles"] = await run_cycles(client, serve_pid, args.cycles)
        print(json.dumps(results["cycles"]), file=sys.stderr)
        results["sessions"] = await run_sessions(client, args.sessions, args.calls)
        print(json.dumps(results["sessions"]), file=sys.stderr)
        await trio.sleep(2)  # the sessions' own servers are reaped
        results["kill"] = await run_kill(client, serve_pid, args.kill_clients, args.kill_calls)
        return results


def main(args: argparse.Namespace) -> dict[str, Any]:
    with serve_running(config, "bench-gateway-") as (port, pid):
        results: dict[str, Any] = trio.run(measure, args, port, pid)
        return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--kill-clients", type=int, default=10)
    parser.add_argument("--kill-calls", type=int, default=10)
    print(json.dumps(main(parser.parse_args()), indent=2))
