"""The benchmarks of issue 6, in one run on one machine (by hand; never by the test suite).

    .venv/bin/python benchmarks/run.py [--quick] [--only NAME ...] [--reps N]
                                       [--minutes N] [--servers N] [--profile] [--json PATH]

Sections (``--only``): calls, whatif, tracing, aio, agent, http, breakdown, memory, import, kill,
search, turns, scale, soak; ``gateway`` and ``bridge`` only when named (they install their peer
on first use); ``profile`` runs only with ``--profile`` (py-spy if found on PATH, in
``--py-spy``, or in /tmp/pyspy/bin; cProfile otherwise or with ``--cprofile``).

Every section that compares (calls, whatif, tracing, aio, agent, http, memory, import, gateway, bridge)
runs its contenders round by round through ``interleave.py``: ``--reps`` rounds (5 at
least), each contender a fresh worker (and, for gateway and bridge, a fresh server) in
every round, the order rotating; it prints the median of the rounds with min-max, the
ratios between contenders of that one run (never across runs), and the 1-minute load
average at the start and end of the section.

* calls: the floor (hand-written Trio + orjson client), ours (``turn.call`` through
  ``Supervisor.open``) and the official SDK's ``ClientSession`` (under trio and under
  asyncio) against the same minimal server: sequential p50/p99 and throughput with 64
  in flight; ratios to the floor and to the SDK (the better of its two backends).
  ``--baseline DIR`` adds ``ours-before``, ours from another copy of the project (a
  before/after comparison in one run; ``--code DIR`` names the copy ``ours`` runs).
  ``--with-limits``: ours (and ours-before) with the exposure lists and rate limits of
  ``_common.LIMITED`` configured, which every call passes (code from before issue 32
  ignores them).
* whatif: ours with the patches of benchmarks/what_if.py applied (bounds, candidates).
* tracing: ours (the calls section's workload) without the ``otel`` extra (OpenTelemetry
  refused at import), with it and no tracer provider (traces off), and with a
  ``BatchSpanProcessor`` over a no-op exporter set globally before ``Supervisor.open``
  (every call traced; its spans per call counted): benchmarks/_tracing.py.
* aio: ours through the Trio API and through ``supervisor.aio`` (an asyncio host, Trio
  its guest), with the SDK's asyncio client beside them (the calls section's workload).
* agent: a pydantic-ai agent's tool call, its tools in-process (``supervisor.adapters``) or
  pydantic-ai's ``MCPToolset`` on ``serve``'s ``/mcp`` (benchmarks/bench_agent.py): what
  the call adds to a run (p50/p99), runs of one call each per second with 16 in flight.
* http: ours and the SDK's client against the SDK's own Streamable HTTP server
  (benchmarks/http_server.py), each in the handshake era (2025-11-25) and in the
  per-request era (2026-07-28): sequential p50/p99, throughput with 16 in flight.
* gateway: ``serve``'s ``/mcp`` (ours, and ours-before) against mcp-proxy before the
  same stdio backend (``bench_fronts.py --one``): sequential p50/p99, calls/s over 16
  sessions.
* bridge: ``serve``'s ``/v1/bridge`` (ours, and ours-before) against supergateway's
  WebSocket mode (``bench_bridge.py --one``): round trip p50/p99, gateway CPU per call,
  session opens per second.
* breakdown: what each step of our call path costs alone (benchmarks/bench_breakdown.py).
* memory: client RSS per open stdio connection at 100 and 500 (floor, ours, SDK).
* import: ``python -c "import supervisor"`` vs ``python -c "import mcp.client.session"``.
* kill: SIGKILL of a server → answer of its last in-flight call; reconnect to steady;
  also ours against a Streamable HTTP server (the SDK's own, with and without resumable
  streams, and pinned to the 2026-07-28 era).
* search / turns: tool_search at 1,000 and 10,000 tools; begin_turn with 10,000 tools.
* scale: ``--servers`` minimal servers in one supervisor; soak: ``--minutes`` of calls,
  crashes and list_changed storms.

``--quick`` keeps the 5 rounds and makes each measurement smaller (the wall time of a
run is in its report). Every number printed is measured in this run; the target
lines compare them with issue 6's targets as they are.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _report
import interleave
import peers
from _common import code_env, free_port, imported_from, worker
from _postgres import postgres_url

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
SECTIONS = [
    *("calls", "whatif", "tracing", "aio", "agent", "http", "breakdown", "memory", "import", "kill"),
    "search",
    *("turns", "scale", "soak"),
]
AGAINST_PEERS = ["gateway", "bridge"]  # with --only: they install their peer (PyPI, npm) on first use
HTTP_INFLIGHT = 16
HTTP_ERAS = ("2025-11-25", "2026-07-28")  # the handshake era, the per-request era
CLIENTS = ["floor", "ours", "sdk-trio", "sdk-asyncio"]
BEFORE = "ours-before"  # with --baseline DIR: ours as the code in DIR has it, in the same run
ON_POSTGRES = "ours-postgresql"  # with --store postgresql|both: ours with its store on PostgreSQL
# Patches of benchmarks/what_if.py measured next to ours. The first run's candidates went
# into the code; what is left are bounds: the call path without its audit row, without
# its journal lines, and without its call event and metrics (the section is skipped
# while this is empty).
WHAT_IFS: list[str] = ["noaudit", "nojournal", "noevents"]
AIO_CLIENTS = ["ours", "ours-aio", "sdk-asyncio"]  # the aio section: Trio API, asyncio host, SDK
AGENT_VIAS = {"in-process": "inproc", "through /mcp": "mcp"}  # the agent section: pydantic-ai's tools
AGENT_INFLIGHT = 16
# The tracing section's contenders: ours in each OpenTelemetry setup of benchmarks/_tracing.py.
TRACINGS = {
    _report.NO_EXTRA: "none",
    "extra without provider": "idle",
    "batch + no-op exporter": "batch",
}


def environment(argv: list[str]) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    cpu = "?"
    with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    packages = {}
    for name in ("trio", "orjson", "mcp", "anyio", "attrs", "cattrs", "jsonschema", "rpds-py", "pydantic"):
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = "-"
    git = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    )
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True)
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join([".venv/bin/python", "benchmarks/run.py", *argv]),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "packages": packages,
        "git": git.stdout.strip() + (" (work tree has uncommitted changes)" if dirty.stdout.strip() else ""),
        "loadavg_start": os.getloadavg(),
    }


# ------------------------------------------------------------------------ sections


def run_calls(args: argparse.Namespace, clients: list[str], section: str = "calls") -> dict[str, Any]:
    """Each client in a fresh worker per round, the clients interleaved round by round."""

    def measure(client: str) -> interleave.Measure:
        name, _, what_if = client.partition("+")
        extra = ["--what-if", what_if] if what_if else []
        if name == ON_POSTGRES:
            name, extra = "ours", [*extra, "--store-url", args.postgres_url]
        name, code = _code_of(name, args)
        if args.with_limits and name == "ours":
            extra.append("--with-limits")
        calls = ("--seq", args.seq, "--tput", args.tput, "--warmup", args.warmup, *extra)
        return lambda _round: worker("bench_calls.py", "--client", name, *calls, timeout=300, code=code)

    return interleave.run(section, {client: measure(client) for client in clients}, args.reps)


def run_tracing(args: argparse.Namespace) -> dict[str, Any]:
    """Ours in each tracing setup (``TRACINGS``), a fresh worker per round, interleaved."""

    def measure(mode: str) -> interleave.Measure:
        calls = ("--seq", args.seq, "--tput", args.tput, "--warmup", args.warmup, "--tracing", mode)
        code = Path(args.code)
        return lambda _round: worker("bench_calls.py", "--client", "ours", *calls, timeout=300, code=code)

    return interleave.run("tracing", {label: measure(mode) for label, mode in TRACINGS.items()}, args.reps)


def run_agent(args: argparse.Namespace) -> dict[str, Any]:
    """The pydantic-ai agent with its tools in-process and through ``/mcp``, a fresh worker
    (and for ``/mcp`` a fresh ``serve``) per round, interleaved."""
    seq, tput, warmup = (100, 400, 20) if args.quick else (500, 2000, 50)
    sizes = ("--seq", seq, "--tput", tput, "--warmup", warmup, "--inflight", AGENT_INFLIGHT)

    def measure(via: str) -> interleave.Measure:
        return lambda _round: worker("bench_agent.py", "--via", via, *sizes, timeout=600)

    return interleave.run("agent", {name: measure(via) for name, via in AGENT_VIAS.items()}, args.reps)


def _code_of(client: str, args: argparse.Namespace) -> tuple[str, Path]:
    """The client name a worker knows, and the copy of the project whose code it runs:
    ``ours-before`` is ours as the code in ``--baseline`` has it, ``ours`` as in ``--code``."""
    if client == BEFORE:
        return "ours", Path(args.baseline)
    return client, Path(args.code)


def _calls_clients(args: argparse.Namespace) -> list[str]:
    """The calls section's contenders: with ``--store``, ours on SQLite and/or on PostgreSQL."""
    clients = [BEFORE, *CLIENTS] if args.baseline else list(CLIENTS)
    if args.store == "sqlite":
        return clients
    at = clients.index("ours") + 1
    clients[at:at] = [ON_POSTGRES]
    return clients if args.store == "both" else [c for c in clients if c != "ours"]


def _ours(args: argparse.Namespace) -> list[str]:
    return [BEFORE, "ours"] if args.baseline else ["ours"]


def run_http(args: argparse.Namespace) -> dict[str, Any]:
    """Both clients against one SDK Streamable HTTP server, interleaved round by round."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server = subprocess.Popen(
        [PY, str(HERE / "http_server.py"), str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30.0
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    tail = (server.stderr.read() if server.stderr else "").strip().splitlines()[-3:]
                    return {"error": f"the SDK's HTTP server did not start: {' | '.join(tail)}"}
                time.sleep(0.1)
        seq, tput, warmup = (100, 400, 20) if args.quick else (500, 2000, 50)
        # Each client in each era (``--protocol`` pins it); with a baseline, ours before
        # and after as each finds the era (auto).
        eras = [(f"{c} {era}", c, ("--protocol", era)) for c in ("ours", "sdk") for era in HTTP_ERAS]
        clients = [*((c, c, ()) for c in _ours(args)), *eras] if args.baseline else eras

        def measure(client: str, era: tuple[str, ...]) -> interleave.Measure:
            name, code = _code_of(client, args)
            sizes = ("--seq", seq, "--tput", tput, "--warmup", warmup, "--inflight", HTTP_INFLIGHT)
            argv = ("--client", name, "--url", url, *era, *sizes)
            return lambda _round: worker("bench_http.py", *argv, timeout=300, code=code)

        contenders = {label: measure(client, era) for label, client, era in clients}
        return {
            "url": url,
            "inflight": HTTP_INFLIGHT,
            "section": interleave.run("http", contenders, args.reps),
        }
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def run_memory(args: argparse.Namespace) -> dict[str, Any]:
    """Client RSS per connection at each count, the clients interleaved round by round."""

    def measure(client: str, count: int) -> interleave.Measure:
        name, code = _code_of(client, args)
        return lambda _round: worker("bench_memory.py", "--client", name, "--connections", count, code=code)

    clients = [*_ours(args), "floor", "sdk"]
    return {
        str(count): interleave.run(
            f"memory@{count}", {client: measure(client, count) for client in clients}, args.reps
        )
        for count in args.memory_at
    }


def run_import(rounds: int, args: argparse.Namespace) -> dict[str, Any]:
    """Fresh interpreters importing each package, interleaved round by round."""
    codes = {
        "python -c pass": ("pass", ROOT),
        "import mcp.client.session": ("import mcp.client.session", ROOT),
    }
    codes["import supervisor"] = ("import supervisor", Path(args.code))
    if args.baseline:
        codes[f"import supervisor ({BEFORE})"] = ("import supervisor", Path(args.baseline))

    def measure(code: str, root: Path) -> interleave.Measure:
        def timed(_round: int) -> dict[str, float]:
            start = time.perf_counter()
            subprocess.run([PY, "-c", code], cwd=root, env=code_env(root), check=True)
            return {"seconds": time.perf_counter() - start}

        subprocess.run([PY, "-c", code], cwd=root, env=code_env(root), check=True)  # warm the bytecode caches
        return timed

    section = interleave.run("import", {label: measure(*how) for label, how in codes.items()}, rounds)
    done = subprocess.run(
        [PY, "-X", "importtime", "-c", "import supervisor"],
        cwd=args.code,
        env=code_env(Path(args.code)),
        capture_output=True,
        text=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    rows.sort(reverse=True)
    return {"section": section, "importtime_top": [(us / 1000, name) for us, name in rows[:14]]}


def run_peer_section(
    args: argparse.Namespace, section: str, peer: str, measure_peer: Sequence[Any]
) -> dict[str, Any]:
    """Ours (and ours-before) against ``peer``: each contender a fresh server and a
    fresh worker per round (``bench_fronts.py --one`` / ``bench_bridge.py --one``)."""
    script = "bench_fronts.py" if section == "gateway" else "bench_bridge.py"
    skipped = {}
    try:
        peers.install(peer)
        clients = [*_ours(args), peer]
    except peers.Unavailable as exc:
        skipped[peer] = str(exc)
        clients = _ours(args)

    def measure(client: str) -> interleave.Measure:
        name, code = _code_of(client, args)
        argv = ("--one", name, "--code", code, *measure_peer)
        return lambda _round: worker(script, *argv, timeout=600)

    return {
        "skipped": skipped,
        "section": interleave.run(section, {c: measure(c) for c in clients}, args.reps),
    }


def run_profile(args: argparse.Namespace) -> dict[str, Any]:
    """Where ours spends its time at 64 in flight and sequentially (py-spy --gil, else cProfile)."""
    candidates = [args.py_spy, shutil.which("py-spy"), "/tmp/pyspy/bin/py-spy"]
    spy = None if args.cprofile else next((c for c in candidates if c and Path(c).exists()), None)
    out: dict[str, Any] = {}
    for mode, flags in (
        ("tput", ["--seq", "0", "--tput", str(args.tput * 3)]),
        ("seq", ["--seq", str(args.seq * 3), "--tput", "64"]),
    ):
        bench = [PY, str(HERE / "bench_calls.py"), "--client", "ours", "--warmup", "200", *flags]
        raw = Path(f"/tmp/bench-profile-{os.getpid()}-{mode}.txt")
        if spy:
            subprocess.run(
                [spy, "record", "--gil", "-r", "1000", "-f", "raw", "-o", str(raw), "--", *bench],
                cwd=ROOT,
                capture_output=True,
                check=False,
            )
            out[mode] = (
                {"tool": "py-spy --gil", **_report.collapse(raw.read_text())}
                if raw.exists()
                else {"error": "py-spy failed"}
            )
        else:
            stats = raw.with_suffix(".pstats")
            subprocess.run(
                [PY, "-m", "cProfile", "-o", str(stats), *bench[1:]],
                cwd=ROOT,
                capture_output=True,
                check=False,
            )
            out[mode] = (
                {"tool": "cProfile", **_report.pstats_top(stats)}
                if stats.exists()
                else {"error": "cProfile run failed"}
            )
            stats.unlink(missing_ok=True)
        raw.unlink(missing_ok=True)
    return out


def _progress(what: str, result: dict[str, Any]) -> None:
    print(
        f"  .. {what}{'  ERROR ' + result['error'] if 'error' in result else ''}", file=sys.stderr, flush=True
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, the same number of rounds")
    parser.add_argument(
        "--only", nargs="+", choices=[*SECTIONS, *AGAINST_PEERS, "profile"], help="run only these sections"
    )
    parser.add_argument(
        "--reps",
        type=int,
        default=interleave.MIN_ROUNDS,
        help=f"rounds of every interleaved section (default and least {interleave.MIN_ROUNDS})",
    )
    parser.add_argument("--minutes", type=float, help="soak duration (default 1, quick 0.25)")
    parser.add_argument("--servers", type=int, help="scale run size (default 200, quick 50)")
    parser.add_argument(
        "--memory-at", type=int, nargs="+", help="connection counts (default 100 500, quick 100)"
    )
    parser.add_argument("--kills", type=int, help="kills for ours (default 100, quick 20)")
    parser.add_argument("--profile", action="store_true", help="also profile our call path")
    parser.add_argument("--py-spy", help="path of a py-spy binary")
    parser.add_argument(
        "--cprofile", action="store_true", help="profile with cProfile even if py-spy is found"
    )
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="calls, http, memory, import: also run ours from this copy of the project (e.g. "
        "`git archive` of an older commit; benchmarks/compare.py makes one), interleaved with "
        "the rest, as the row 'ours-before'",
    )
    parser.add_argument(
        "--code",
        metavar="DIR",
        default=str(ROOT),
        help="the copy of the project whose code the row 'ours' runs (default: this one; "
        "benchmarks/compare.py passes HEAD's worktree)",
    )
    parser.add_argument(
        "--compared", action="append", default=[], help="a line naming what was compared (compare.py)"
    )
    parser.add_argument(
        "--with-limits",
        action="store_true",
        help="calls: ours (and ours-before) with exposure lists and rate limits every call passes",
    )
    parser.add_argument(
        "--store",
        choices=("sqlite", "postgresql", "both"),
        default="sqlite",
        help=f"calls: ours with its store on SQLite (default), on PostgreSQL (row {ON_POSTGRES}), "
        "or both, interleaved",
    )
    parser.add_argument(
        "--store-url",
        help="with --store postgresql|both: this database (default: a throwaway cluster, fsync on)",
    )
    parser.add_argument("--json", help="also write every raw result to this file")
    parser.add_argument(
        "--render", metavar="JSON", help="print the report of an earlier --json file, run nothing"
    )
    args = parser.parse_args(argv)
    quick = args.quick
    if args.reps < interleave.MIN_ROUNDS:
        parser.error(f"--reps {args.reps}: a comparison needs at least {interleave.MIN_ROUNDS} rounds")
    args.minutes = args.minutes if args.minutes is not None else (0.25 if quick else 1.0)
    args.servers = args.servers or (50 if quick else 200)
    args.memory_at = args.memory_at or ([100] if quick else [100, 500])
    args.kills = args.kills or (20 if quick else 100)
    args.seq, args.tput, args.warmup = (500, 3000, 200) if quick else (2000, 10000, 300)
    # gateway: calls timed one after another, then seconds of calls over 16 sessions;
    # bridge: round trips timed, then session opens (1 and 16 at a time).
    args.gateway = ("--calls", 200, "--seconds", 2) if quick else ("--calls", 1000, "--seconds", 5)
    args.bridge = ("--calls", 500, "--opens", 20) if quick else ("--calls", 2000, "--opens", 50)
    args.sections = args.only or ([*SECTIONS, "profile"] if args.profile else SECTIONS)
    return args


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    if args.render:
        try:
            print(_report.render(json.loads(Path(args.render).read_text())))
        except interleave.NotInterleaved as exc:
            sys.exit(f"{args.render}: {exc}")
        return
    env = environment(argv)
    env["compared"] = args.compared
    if args.baseline or Path(args.code) != ROOT:
        code = {"ours": Path(args.code), **({BEFORE: Path(args.baseline)} if args.baseline else {})}
        env["code_of"] = {who: imported_from(where) for who, where in code.items()}
        for who, where in env["code_of"].items():
            print(f"{who} runs supervisor from {where}", file=sys.stderr, flush=True)
    results: dict[str, Any] = {"env": env}
    started = time.perf_counter()
    sections = args.sections
    if "calls" in sections:
        with postgres_url(args.store_url) if args.store != "sqlite" else contextlib.nullcontext() as url:
            args.postgres_url = url
            env["store"] = args.store
            results["calls"] = run_calls(args, _calls_clients(args))
    if "whatif" in sections and WHAT_IFS:
        results["whatif"] = run_calls(args, ["ours", *(f"ours+{w}" for w in WHAT_IFS)], "whatif")
    if "tracing" in sections:
        results["tracing"] = run_tracing(args)
    if "aio" in sections:
        results["aio"] = run_calls(args, AIO_CLIENTS, "aio")
    if "agent" in sections:
        results["agent"] = run_agent(args)
    if "http" in sections:
        results["http"] = run_http(args)
    if "gateway" in sections:
        results["gateway"] = run_peer_section(args, "gateway", "mcp-proxy", [*args.gateway, "--sessions", 16])
    if "bridge" in sections:
        results["bridge"] = run_peer_section(args, "bridge", "supergateway", [*args.bridge, "--warm", 0])
    if "breakdown" in sections:
        results["breakdown"] = worker("bench_breakdown.py", "--rounds", 5000 if args.quick else 20000)
        _progress("breakdown", results["breakdown"])
    if "memory" in sections:
        results["memory"] = run_memory(args)
    if "import" in sections:
        results["import"] = run_import(5 if args.quick else 9, args)
    if "kill" in sections:
        side = max(10, args.kills // 4)
        results["kill"] = {
            "ours": worker("bench_kill.py", "--client", "ours", "--kills", args.kills),
            "floor": worker("bench_kill.py", "--client", "floor", "--kills", side),
            "sdk": worker("bench_kill.py", "--client", "sdk", "--kills", side),
            "ours-http-resumable": worker(
                "bench_kill.py", "--client", "ours-http", "--resumable", "--kills", side
            ),
            "ours-http": worker("bench_kill.py", "--client", "ours-http", "--kills", side),
            **{
                f"ours-http-{era}": worker(
                    "bench_kill.py", "--client", "ours-http", "--protocol", era, "--kills", side
                )
                for era in HTTP_ERAS
            },
        }
        _progress("kill", {})
    if "search" in sections:
        results["search"] = worker("bench_search.py", "index", "--queries", 500 if args.quick else 3000)
        _progress("search", results["search"])
    if "turns" in sections:
        results["turns"] = worker("bench_search.py", "turns", "--turns", 300 if args.quick else 2000)
        _progress("turns", results["turns"])
    if "scale" in sections:
        results["scale"] = worker(
            "bench_scale.py",
            "--servers",
            args.servers,
            "--seconds",
            2 if args.quick else 3,
            timeout=900 + args.servers,
        )
        _progress("scale", results["scale"])
    if "soak" in sections:
        results["soak"] = worker("bench_soak.py", "--minutes", args.minutes, timeout=args.minutes * 60 + 300)
        _progress("soak", results["soak"])
    if "profile" in sections:
        results["profile"] = run_profile(args)
    env["loadavg_end"] = os.getloadavg()
    env["wall_s"] = time.perf_counter() - started
    print(_report.render(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
