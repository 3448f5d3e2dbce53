"""The WebSocket bridge (issue 16): ``/v1/bridge`` of a real ``serve``, and supergateway.

    python benchmarks/bench_bridge.py [--sessions 500] [--burst 64] [--cycles 10000]
                                      [--calls 2000] [--rounds 5] [--opens 200] [--warm 2]
                                      [--only peer floor sessions cycles] [--json PATH]

``serve`` runs as a subprocess on a free loopback port with one server, ``mini``
(``benchmarks/minimal_server.py``, ``bridge: true``): every bridge session is a process
of its own. The client is trio-websocket speaking the envelope by hand (``_bridge.py``),
so what is measured is the hub, not a client library:

* **sessions**: that many sockets at once, each opening one session (a spawn storm),
  then ``initialize`` + one ``tools/call`` on each, then every session closed; the time
  of each phase, ``serve``'s peak RSS (VmHWM) and descriptors, and the processes left.
* **cycles**: open/close cycles, 8 at a time, in four kinds: a session closed on a
  socket kept for many (``reuse``), a new socket closed cleanly (``clean``), a new
  socket dropped with no close handshake after the open's answer (``drop``), and one
  dropped right after sending the open (``race``); ``serve``'s descriptors and RSS
  at the start, middle and end (each after the sessions are gone), processes left.
* **peer** (``bridge_peers.py``): ours against supergateway's WebSocket mode
  (``--outputTransport ws``) in front of the same minimal_server.py, interleaved round
  by round (``interleave.py``; ``--rounds``, at least 5), each of them a fresh server
  measured by a fresh worker (``bench_bridge.py --one NAME``) in every round: p50/p99
  of ``--calls`` ``tools/call`` round trips over one session, the gateway process's
  CPU per call, and session opens per second (a usable session: opened and its
  ``initialize`` answered; sequential, and 16 at a time).
  With ``--warm N`` (2 by default) the opens are measured again on ``mini-warm``, the
  same server with ``warm: N``: each session takes a spare spawned ahead (taken raw,
  before ``initialize``), and the pool spawns its replacement; then a burst of 16
  concurrent opens right after another (the pool keeps as many spares as a recent
  burst took, ``supervisor/runtime/warm_demand.py``).
  supergateway shares ONE child among all its connections, so its "session" is a
  WebSocket connection and nothing is spawned; ours spawns a process per session.
  Supergateway runs with ``--logLevel none`` (its default logs every message).
  ``peers.py`` installs it in ``benchmarks/.peers/`` (as it does every peer of
  ``bench_fronts.py``); without npm the column is skipped and says why.
* **floor**: the same frame echoed by a bare WebSocket server (``ws_echo_server.py``:
  Quart-Trio on Hypercorn, a bare ASGI app on Hypercorn as ``serve``'s ``/v1/bridge``
  runs since ``supervisor/bridge/asgi_app.py``, and trio-websocket's own): the web
  stack's share of a round trip; the three interleaved like the peers.

Prints the peer and floor tables (medians of the rounds, min-max, ratios, the load
average at the start and end of each), then one JSON object; ``benchmarks/RESULTS.md``
keeps the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import interleave  # noqa: E402
from _bridge import SERVER, Serve, call, drop, ours_socket, text_of  # noqa: E402
from _common import ROOT, descendants, emit, proc_status, raise_fd_limit, serve_running, worker  # noqa: E402
from bridge_peers import measure_echo, measure_ours, measure_supergateway, supergateway  # noqa: E402
from bridge_table import bridge_table, floor_table  # noqa: E402


def config(port: int, most: int, warm: int) -> dict[str, Any]:
    servers: dict[str, Any] = {"mini": {"command": SERVER, "trusted": True, "bridge": True}}
    if warm:  # the same server with spares spawned ahead (supervisor/runtime/warm_pool.py)
        servers["mini-warm"] = {**servers["mini"], "warm": warm}
    return {
        "admin": {"bind": f"127.0.0.1:{port}"},
        "tool_search": {"enabled": False},
        "bridge": {"max_sessions_per_tenant": most, "max_processes": most},
        "servers": servers,
    }


# ------------------------------------------------------------------ sections


async def run_sessions(serve: Serve, n: int, burst: int) -> dict[str, Any]:
    """``n`` sockets, a session each, all open at once; at most ``burst`` sockets in
    their TCP + WebSocket handshake at a time (0: no bound). Hypercorn listens with a
    backlog of 100: a burst of hundreds of connects overflows the accept queue, and
    the connections it drops hang until the client's connect timeout."""
    connecting = trio.CapacityLimiter(burst or n)
    opened = trio.Event()
    called = trio.Event()
    closing = trio.Event()
    counts = {"opened": 0, "called": 0, "closed": 0, "wrong": 0}
    peak: dict[str, Any] = {}

    async def one(index: int) -> None:
        async with ours_socket(serve.url, connecting) as client:
            sid = await client.open(index)
            counts["opened"] += 1
            if counts["opened"] == n:
                opened.set()
            await opened.wait()
            await client.initialize(sid)
            answer = await client.rpc(sid, call(1, f"session {index}"))
            counts["wrong"] += text_of(answer) != f"session {index}"
            counts["called"] += 1
            if counts["called"] == n:
                called.set()
            await closing.wait()
            await client.close(sid)
            counts["closed"] += 1

    began = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for index in range(n):
            nursery.start_soon(one, index)
        await opened.wait()
        t_open = time.perf_counter()
        await called.wait()
        t_called = time.perf_counter()
        peak = {"processes": serve.children(), **serve.sample()}
        kids = descendants(serve.pid)
        peak["children_rss_mb"] = round(sum(proc_status(pid).get("VmRSS", 0) for pid in kids) / 1024, 1)
        closing.set()
    t_closed = time.perf_counter()
    settle = await serve.settled()
    return {
        "sessions": n,
        "open_all_s": round(t_open - began, 2),
        "opens_per_s": round(n / (t_open - began), 1),
        "init_and_call_all_s": round(t_called - t_open, 2),
        "close_all_s": round(t_closed - t_called, 2),
        "reaped_after_s": round(settle, 2),
        "wrong_answers": counts["wrong"],
        "at_peak": peak,
        "serve_peak_rss_kb": proc_status(serve.pid)["VmHWM"],
        "after": serve.sample(),
        "processes_left": serve.children(),
    }


async def run_cycles(serve: Serve, cycles: int, parallel: int = 8) -> dict[str, Any]:
    kinds = ("reuse", "clean", "drop", "race")
    done = dict.fromkeys(kinds, 0)
    samples: list[dict[str, Any]] = []

    async def worker(first: int, step: int, stop: int) -> None:
        async with ours_socket(serve.url) as kept:
            for index in range(first, stop, step):
                kind = kinds[index % 4]
                if kind == "reuse":
                    sid = await kept.open(index)
                    await kept.close(sid)
                else:
                    with contextlib.suppress(Exception):  # a drop breaks the client's own close
                        async with ours_socket(serve.url) as client:
                            if kind == "race":
                                await client.send("mcp:session:open", {"serverName": "mini"}, index)
                                await drop(client.ws)
                            else:
                                sid = await client.open(index)
                                if kind == "clean":
                                    await client.close(sid)
                                else:
                                    await drop(client.ws)
                done[kind] += 1

    async def batch(start: int, stop: int) -> float:
        began = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for w in range(parallel):
                nursery.start_soon(worker, start + w, parallel, stop)
        return time.perf_counter() - began

    await batch(0, 200)  # warm-up
    await serve.settled()
    samples.append({"after": 0, **serve.sample()})
    half = cycles // 2
    first = await batch(0, half)
    await serve.settled()
    samples.append({"after": half, **serve.sample()})
    second = await batch(half, cycles)
    await serve.settled()
    samples.append({"after": cycles, **serve.sample()})
    return {
        "cycles": cycles,
        "kinds": done,
        "in_parallel": parallel,
        "cycles_per_s": round(cycles / (first + second), 1),
        "samples": samples,
        "processes_left": serve.children(),
    }


# ---------------------------------------------------------------------- main

PEERS = ("ours", "supergateway")
ECHOES = ("echo-quart", "echo-hypercorn", "echo-trio-websocket")


def one(args: argparse.Namespace) -> dict[str, Any]:
    """Worker: measure one contender once, on a server of its own."""
    if args.one == "ours":
        most = 16 + 2 * args.warm
        with serve_running(lambda port: config(port, most, args.warm), "bench-bridge-", args.code) as (
            port,
            pid,
        ):
            # After a burst the pool keeps up to 16 spares for a minute (warm_demand.py):
            # settled means no session and no process beyond those, not back to warm.
            serve = Serve(port, pid, spares=16 if args.warm else 0)
            return trio.run(measure_ours, serve, args.calls, args.opens, args.warm)
    if args.one == "supergateway":
        return trio.run(measure_supergateway, args.calls, args.opens)
    return trio.run(measure_echo, args.one.removeprefix("echo-"), args.calls)


def interleaved(args: argparse.Namespace, section: str, names: Sequence[str]) -> dict[str, Any]:
    """``names`` measured round by round, each a fresh worker (``--one``) per round."""
    sizes = ("--calls", args.calls, "--opens", args.opens, "--warm", args.warm, "--code", args.code)

    def measure(name: str) -> interleave.Measure:
        return lambda _round: worker("bench_bridge.py", "--one", name, *sizes, timeout=600)

    return interleave.run(section, {name: measure(name) for name in names}, args.rounds)


async def measure(args: argparse.Namespace, serve: Serve) -> dict[str, Any]:
    await serve.ready()
    results: dict[str, Any] = {}
    for section, run in (
        ("sessions", lambda: run_sessions(serve, args.sessions, args.burst)),
        ("cycles", lambda: run_cycles(serve, args.cycles)),
    ):
        if section in args.only:
            results[section] = await run()
            results[section]["load_after"] = os.getloadavg()
            print(json.dumps({section: results[section]}), file=sys.stderr)
    return results


def main(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"load_before": os.getloadavg()}
    if "peer" in args.only:
        launcher, why = supergateway()  # installed before the rounds, not in them
        results["peer"] = interleaved(args, "peer", PEERS if launcher else PEERS[:1])
        if launcher is None:
            results["peer"]["skipped"] = {"supergateway": why}
        print("\n".join(bridge_table("peer", results["peer"])))
    if "floor" in args.only:
        results["floor"] = interleaved(args, "floor", ECHOES)
        print("\n".join(floor_table("floor", results["floor"])))
    if {"sessions", "cycles"} & set(args.only):
        raise_fd_limit(8192)  # serve inherits it: 500 sessions hold about 3,000 descriptors
        with serve_running(lambda port: config(port, args.sessions + 64, 0), "bench-bridge-") as (port, pid):
            results.update(trio.run(measure, args, Serve(port, pid)))
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--burst", type=int, default=64, help="connects in flight at once (0: all)")
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=2000, help="round trips per round and contender")
    parser.add_argument(
        "--rounds", type=int, default=interleave.MIN_ROUNDS, help="peer, floor: rounds (5 or more)"
    )
    parser.add_argument("--opens", type=int, default=200, help="session opens per measure")
    parser.add_argument("--warm", type=int, default=2, help="warm spares of mini-warm (0: no warm row)")
    parser.add_argument("--only", nargs="+", default=["peer", "floor", "sessions", "cycles"])
    parser.add_argument("--one", choices=[*PEERS, *ECHOES], help="worker: measure this once, print its JSON")
    parser.add_argument(
        "--code", type=Path, default=ROOT, help="with --one ours: the copy of the project to serve"
    )
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    options = parser.parse_args()
    if options.one:
        emit(one(options))
        sys.exit(0)
    if options.rounds < interleave.MIN_ROUNDS:
        parser.error(f"--rounds {options.rounds}: a comparison needs at least {interleave.MIN_ROUNDS}")
    found = main(options)
    if options.json:
        options.json.write_text(json.dumps(found, indent=1))
    print(json.dumps(found, indent=2))
