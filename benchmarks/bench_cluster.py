"""Replicas behind the stock nginx file (issue 35): calls/s and latency with 1, 2 and 3
replicas, and the time from a replica's SIGKILL to the first answer of a session it held.

    python benchmarks/bench_cluster.py [--rounds 5] [--seconds 4] [--sessions 12] [--json FILE]

Three ``serve`` replicas run on one throwaway PostgreSQL (benchmarks/_postgres.py) with
one config file (tests/support/replicas.py), each with its own ``mini_server.py``; three
nginx instances run the shipped ``config/examples/nginx.conf`` over the first one, two
and three of them (tests/support/nginx.py). Everything, clients included, shares this
machine's cores: more replicas add no CPU here, so the rows say what the routing and
the shared store cost, not how a cluster on more machines scales.

* ``cluster``: the contenders ``1 replica``, ``2 replicas``, ``3 replicas``, interleaved
  round by round: each round opens ``--sessions`` handshake-era sessions through that
  nginx (initialize goes round-robin), each calls ``mini_echo`` one call after another
  for ``--seconds``; calls/s, calls/s per core, p50 and p99 of a call.
* ``takeover``: each round opens six sessions through the 3-replica nginx, SIGKILLs the
  replica holding most of them and times, for each of its sessions, its next request
  (sent at once) until answered by another replica; then the replica is started again.
  The goal is 2 s (the heartbeat's 1 s TTL, then a store read and a restore).

Printed: medians of the rounds with min-max and the 1-minute load average at start and
end; ContextForge's published figure for comparison is about 462 requests/s on three
replicas (its own hardware).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import interleave
import trio
from _common import quantiles
from _postgres import postgres_url

from tests.support.admin import Http
from tests.support.gateway_http import McpHttp, request
from tests.support.nginx import running_nginx
from tests.support.paths import SERVERS
from tests.support.replicas import ReplicaProcess, cluster_config, replicas


async def _echoes(front: str, sessions: int, seconds: float) -> dict[str, Any]:
    opened = []
    for _ in range(sessions):
        mcp = McpHttp(Http(front))
        await mcp.open()
        opened.append(mcp)
    latencies: list[float] = []
    errors = 0
    deadline = trio.current_time() + seconds

    async def client(mcp: McpHttp, k: int) -> None:
        nonlocal errors
        n = 0
        while trio.current_time() < deadline:
            n += 1
            begin = trio.current_time()
            reply = await mcp.post(
                request(n, "tools/call", {"name": "mini_echo", "arguments": {"text": f"{k}-{n}"}})
            )
            if reply.status == 200:
                latencies.append((trio.current_time() - begin) * 1000)
            else:
                errors += 1

    async with trio.open_nursery() as nursery:
        for k, mcp in enumerate(opened):
            nursery.start_soon(client, mcp, k)
    for mcp in opened:
        await mcp.http.request("DELETE", "/mcp", headers=mcp.headers())
    q = quantiles(latencies)
    rate = len(latencies) / seconds
    return {"calls_per_s": rate, "calls_per_s_per_core": rate / (os.cpu_count() or 1),
            "p50_ms": q["p50"], "p99_ms": q["p99"], "errors": errors}  # fmt: skip


async def _takeover(front: str, group: list[ReplicaProcess]) -> dict[str, Any]:
    by_name = {r.name: r for r in group}
    opened = []
    for _ in range(6):
        mcp = McpHttp(Http(front))
        await mcp.open()
        opened.append(mcp)
    holders = Counter(str(m.session_id).split(".")[0] for m in opened)
    victim = by_name[holders.most_common(1)[0][0]]
    moved = [m for m in opened if str(m.session_id).startswith(victim.name + ".")]
    await victim.kill()
    killed = trio.current_time()
    waits: list[float] = []

    async def next_answer(mcp: McpHttp) -> None:
        reply = await mcp.post(request(99, "tools/list"), accept="application/json")
        assert reply.status == 200, reply
        waits.append(trio.current_time() - killed)

    async with trio.open_nursery() as nursery:
        for mcp in moved:
            nursery.start_soon(next_answer, mcp)
    await victim.start()
    for mcp in opened:
        await mcp.http.request("DELETE", "/mcp", headers=mcp.headers())
    return {"first_answer_s": min(waits), "last_answer_s": max(waits),
            "median_answer_s": statistics.median(waits), "moved_sessions": len(moved)}  # fmt: skip


async def _main(args: argparse.Namespace, url: str, folder: Path) -> dict[str, Any]:
    mini = {
        "command": sys.executable,
        "args": [str(SERVERS / "mini_server.py")],
        "trusted": True,
        "start": "eager",
    }
    config = cluster_config(folder / "config.json", url, {"mini": mini})
    group = replicas(3, config, folder)
    async with trio.open_nursery() as starting:
        for replica in group:
            starting.start_soon(replica.start)
    try:
        ports = {r.name: r.port for r in group}
        async with (
            running_nginx(dict(list(ports.items())[:1]), folder / "nginx1") as one,
            running_nginx(dict(list(ports.items())[:2]), folder / "nginx2") as two,
            running_nginx(ports, folder / "nginx3") as three,
        ):
            fronts = {"1 replica": one.url, "2 replicas": two.url, "3 replicas": three.url}

            def measure(front: str) -> interleave.Measure:
                return lambda index: trio.from_thread.run(_echoes, front, args.sessions, args.seconds)

            contenders = {name: measure(front) for name, front in fronts.items()}
            cluster = await trio.to_thread.run_sync(interleave.run, "cluster", contenders, args.rounds)
            rounds = {"kill": lambda index: trio.from_thread.run(_takeover, three.url, group)}
            takeover = await trio.to_thread.run_sync(interleave.run, "takeover", rounds, args.rounds)
        return {"cluster": cluster, "takeover": takeover}
    finally:
        for replica in group:
            if replica.process is not None and replica.process.returncode is None:
                await replica.stop()


def _print(result: dict[str, Any], args: argparse.Namespace) -> None:
    for section, keys in (("cluster", ("calls_per_s", "calls_per_s_per_core", "p50_ms", "p99_ms")),
                          ("takeover", ("first_answer_s", "median_answer_s", "last_answer_s"))):  # fmt: skip
        marker = result[section]["interleaved"]
        print(f"\n{section}: {args.rounds} rounds, interleaved; load average {marker['load_start']:.2f} "
              f"at start, {marker['load_end']:.2f} at end")  # fmt: skip
        print("| | " + " | ".join(f"{k} (min-max)" for k in keys) + " |")
        print("|---" * (len(keys) + 1) + "|")
        for name, measured in result[section]["contenders"].items():
            cells = [measured["metrics"][k] for k in keys]
            shown = " | ".join(f"{c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f})" for c in cells)
            print(f"| {name} | {shown} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--store-url", help="a PostgreSQL to use (default: a throwaway cluster)")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    with postgres_url(args.store_url) as url, tempfile.TemporaryDirectory(prefix="bench-cluster-") as folder:
        result = trio.run(_main, args, url, Path(folder))
    _print(result, args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
