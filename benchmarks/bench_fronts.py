"""Our gateway against the fronts a user would pick instead, interleaved in one run (by hand only).

    python benchmarks/bench_fronts.py [--quick] [--rounds 5] [--calls 1000] [--sessions 16]
                                      [--seconds 5] [--warm-rounds 3] [--only NAME ...] [--json PATH]

``--quick``: fewer calls, shorter windows, the same rounds. One client for every
HTTP row: the official SDK's (the version in our virtualenv) over Streamable HTTP in
handshake mode (``mode="legacy"``), under Trio. Each front sits in front of the same backend,
tests/servers/mini_server.py on stdio (echo, progress, sleep; every method it reads
goes to a log, so a cancel that reaches it is seen). The fronts (``fronts.py``), each
installed in its own folder by ``peers.py`` because they pin other ``mcp`` versions:

* ``direct-http``: the floor, the client straight to the SDK's own Streamable HTTP
  server (benchmarks/http_server.py, the same tools);
* ``ours``: ``mcp-supervisor serve``'s ``/mcp`` (the backend trusted, search off);
* ``fastmcp``: fastmcp 4's ``create_proxy`` (benchmarks/fastmcp_proxy.py);
* ``mcp-proxy``: ``mcp-proxy --port P -- COMMAND`` (its ``/mcp``);
* ``supergateway``: ``--outputTransport streamableHttp --stateful`` (a child per
  session);
* ``supergateway-ws``: ``--outputTransport ws``, reached with a raw WebSocket client
  (``fronts_ws.py``; one child shared by every socket);
* with ``--only``: ``ours-http`` and ``fastmcp-http``, the same fronts before the SDK's
  HTTP server instead of the stdio backend; ``ours-lean``, ours on a lean HTTP/1.1
  server instead of Hypercorn (``lean_mcp.py``, a prototype: issue 37's measure of
  what leaving Hypercorn would give).

The fronts run round by round (``interleave.py``: A B C, B C A, ...; ``--rounds``, at
least 5), each front in each round a fresh server measured by a fresh worker
(``bench_fronts.py --one NAME``): sequential p50/p99 of an echo call over one session
and calls/s with ``--sessions`` sessions calling at once; the table shows the median of
the rounds with min-max. In the first round each front also takes four correctness
checks: progress reaches the caller; progress of one session reaches no other (a
second session listens); a cancelled call's ``notifications/cancelled`` reaches the
backend; the backend SIGKILLed under a 30 s call: how long until the call is answered,
and whether the same session's next call succeeds within 10 s (the front brought the
backend back). Then the time to a new session's first call on a Python backend with
``warm: 0`` and ``warm: 1`` (``bench_warm.py``'s measure), interleaved the same way.
Prints a table with ratios against ours, issue 17's targets met or missed, the load
average at the start and end of each interleaved run, and one JSON object;
RESULTS.md keeps the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import interleave  # noqa: E402
import peers  # noqa: E402
from _common import ROOT, emit, worker  # noqa: E402
from fronts import FRONTS, measure_front  # noqa: E402
from fronts_table import table  # noqa: E402

DEFAULT = FRONTS[:6]  # the HTTP-backend rows only with --only: they add a minute


def installed(names: list[str]) -> tuple[list[str], dict[str, str]]:
    """The fronts whose peer is installed (installing it first, untimed), and why the
    others are skipped."""
    ready, skipped = [], {}
    for name in names:
        peer = name.removesuffix("-ws").removesuffix("-http")
        try:
            if peer in (*peers.PYTHON_PEERS, *peers.NPM_PEERS):
                peers.install(peer)
            ready.append(name)
        except peers.Unavailable as exc:
            skipped[name] = str(exc)
    return ready, skipped


def run(args: argparse.Namespace) -> dict[str, Any]:
    fronts, skipped = installed(list(args.only))

    def measure(name: str) -> interleave.Measure:
        sizes = ("--calls", args.calls, "--sessions", args.sessions, "--seconds", args.seconds)
        # The checks (a SIGKILLed backend among them) once per front, in the first round.
        return lambda index: worker(
            "bench_fronts.py", "--one", name, *sizes, *(["--checks"] if index == 0 else []), timeout=600
        )

    results: dict[str, Any] = {"skipped": skipped}
    results["fronts"] = interleave.run("fronts", {name: measure(name) for name in fronts}, args.rounds)
    if args.warm_rounds:
        sizes = ("--rounds", args.warm_rounds, "--gap", args.warm_gap)

        def first_call(warm: int) -> interleave.Measure:
            return lambda _round: worker("bench_warm.py", "--warm", warm, *sizes)

        warm = {f"warm: {w}": first_call(w) for w in (0, 1)}
        results["first call"] = interleave.run("first call", warm, args.rounds)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=interleave.MIN_ROUNDS)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warm-rounds", type=int, default=3, help="first calls per round; 0: no such rows")
    parser.add_argument("--warm-gap", type=float, default=1.5)
    parser.add_argument("--quick", action="store_true", help="fewer calls, shorter windows")
    parser.add_argument("--only", nargs="*", choices=FRONTS)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--one", choices=FRONTS, help="worker: measure this front once, print its JSON")
    parser.add_argument(
        "--code", type=Path, default=ROOT, help="with --one ours: the copy of the project to serve"
    )
    parser.add_argument("--checks", action="store_true", help="with --one: also the correctness checks")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.seconds, args.warm_rounds = 300, 2.0, min(args.warm_rounds, 2)
    if args.one:
        one = (args.one, args.code, args.calls, args.sessions, args.seconds, args.checks)
        emit(trio.run(measure_front, *one))
        return 0
    if args.rounds < interleave.MIN_ROUNDS:
        parser.error(f"--rounds {args.rounds}: a comparison needs at least {interleave.MIN_ROUNDS}")
    if args.only is None:
        args.only = list(DEFAULT)
    results = run(args)
    versions = {name: peers.version(name) for name in (*peers.PYTHON_PEERS, *peers.NPM_PEERS)}
    print(table(results["fronts"], results.get("first call")))
    for name, why in results["skipped"].items():
        print(f"- {name} skipped: {why}")
    print(f"versions {versions}")
    print(json.dumps({"versions": versions, **results}))
    if args.json:
        args.json.write_text(json.dumps({"versions": versions, **results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
