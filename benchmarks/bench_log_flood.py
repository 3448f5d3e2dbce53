"""A healthy server's calls while another server floods its log, interleaved (by hand only).

Issue 28: one call that made a server send 100,000 ``notifications/message`` below its
``log_level`` wrote each as a log line (12 to 18 MB a call), and calls to a healthy
server of the same supervisor went from p50 18 ms to 1.1 to 1.6 s. Now a message
below ``log_level`` is dropped before anything is formatted, and what is left passes
a token bucket (100 a second, bursts of 200).

Two ``tests/servers/mini_server.py`` under one supervisor (embedded, its log written
as ``serve`` writes it, to a file), ``calm`` and ``flood`` (``--flood``, ``log_level:
warning``). For ``--seconds`` the calm server's ``echo`` is called one call after
another and each call timed; meanwhile, by contender:

- ``quiet``: nothing else;
- ``flood below``: ``flood`` is called again and again, each call 100,000 messages at
  ``info``: below its ``log_level``, and at the level our log writes (the issue's case:
  before, each message became a log line);
- ``flood at level``: the same at ``error`` (at its level: the token bucket's case);
- with ``--baseline DIR``, ``flood below (before)``: ``flood below`` on the copy of
  the project in DIR (an older commit's tree), for the before and after.

Contenders run round by round, each in a fresh worker process (``interleave.py``); the
table gives the calm server's p50 and p99, the p50's move against ``quiet`` in the
same round (the median over the rounds, with min–max), the flood calls made, their
duration and the log written.

Run: ``.venv/bin/python benchmarks/bench_log_flood.py [--rounds 5] [--seconds 5]
[--count 100000] [--baseline DIR] [--json FILE]``; prints the table, then one JSON
object.
"""

# ruff: noqa: RUF001, RUF002  (en dashes in the table on purpose)

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import interleave  # noqa: E402
import tables  # noqa: E402
from _common import PYTHON, ROOT, emit, load_json_config, quantiles, wait_steady, worker  # noqa: E402

MINI = str(ROOT / "tests" / "servers" / "mini_server.py")
LEVELS = {"quiet": None, "flood below": "info", "flood at level": "error"}
BEFORE = "flood below (before)"


def config() -> Any:
    server = {"command": PYTHON, "trusted": True, "start": "eager", "call_timeout_ms": 120_000}
    servers = {
        "calm": {**server, "args": [MINI]},
        "flood": {**server, "args": [MINI, "--flood"], "log_level": "warning"},
    }
    return load_json_config({"servers": servers})


@contextlib.contextmanager
def log_to(path: Path) -> Iterator[None]:
    """The supervisor's log as ``serve`` writes it (structured, redacted, INFO), into
    ``path`` instead of stderr, for the block."""
    from supervisor.runtime import logs

    with path.open("w", encoding="utf-8") as file:
        sys.stderr = file  # configure() writes to sys.stderr
        try:
            logs.configure(level=logging.INFO)
            yield
        finally:
            logging.getLogger().handlers.clear()
            sys.stderr = sys.__stderr__


async def measure(level: str | None, seconds: float, count: int) -> dict[str, Any]:
    from supervisor import Supervisor

    with tempfile.TemporaryDirectory(prefix="bench-log-flood-") as tmp:
        log_path = Path(tmp) / "supervisor.log"
        with log_to(log_path):
            latencies, floods = await calls_during_floods(
                Supervisor, Path(tmp) / "state", level, seconds, count
            )
        log_bytes = log_path.stat().st_size
    return {
        "calm_ms": quantiles(latencies),
        "floods": len(floods),
        "flood_call_s": statistics.median(floods) if floods else 0.0,
        "log_mb": log_bytes / 1e6,
    }


async def calls_during_floods(
    supervisor: Any, state: Path, level: str | None, seconds: float, count: int
) -> tuple[list[float], list[float]]:
    """The calm server's call latencies (ms) and the flood calls' durations (s)."""
    async with supervisor.open(config(), state_dir=state) as sup:
        with trio.fail_after(60):
            await wait_steady(sup, ["calm", "flood"])
        async with sup.session() as session:
            turn = await session.begin_turn()
            for _ in range(200):  # warm up
                await turn.call("calm_echo", {"text": "hi"})
            latencies: list[float] = []
            floods: list[float] = []

            async def flood_again() -> None:
                while True:
                    began = time.perf_counter()
                    result = await turn.call("flood_flood", {"count": count, "level": level})
                    if not result.ok:
                        raise RuntimeError(f"the flood call failed: {result.as_dict()}")
                    floods.append(time.perf_counter() - began)

            async with trio.open_nursery() as nursery:
                if level is not None:
                    nursery.start_soon(flood_again)
                    await trio.sleep(0.2)  # the flood is under way
                deadline = time.perf_counter() + seconds
                while time.perf_counter() < deadline:
                    began = time.perf_counter()
                    result = await turn.call("calm_echo", {"text": "hi"})
                    latencies.append((time.perf_counter() - began) * 1000)
                    if not result.ok:
                        raise RuntimeError(f"the calm call failed: {result.as_dict()}")
                nursery.cancel_scope.cancel()
    return latencies, floods


def p50_moves(section: dict[str, Any], contender: str) -> str:
    """The contender's calm p50 minus ``quiet``'s in the same round, over the rounds."""
    interleave.check("log flood", section, (contender, "quiet"))
    rounds = section["contenders"]
    moves = [
        mine["calm_ms"]["p50"] - quiet["calm_ms"]["p50"]
        for mine, quiet in zip(rounds[contender]["rounds"], rounds["quiet"]["rounds"], strict=True)
        if "error" not in mine and "error" not in quiet
    ]
    if not moves:
        return "-"
    return f"{statistics.median(moves):+.2f} ({min(moves):+.2f}–{max(moves):+.2f})"


def table(section: dict[str, Any]) -> str:
    columns = [
        ("calm_ms.p50", "calm p50 ms", "{:.2f}"),
        ("calm_ms.p99", "calm p99 ms", "{:.2f}"),
        ("calm_ms.n", "calm calls", "{:.0f}"),
        ("floods", "flood calls", "{:.0f}"),
        ("flood_call_s", "flood call s", "{:.2f}"),
        ("log_mb", "log MB", "{:.2f}"),
    ]
    lines = tables.table("log flood", section, columns)
    moves = ["", "| contender | calm p50 moved, ms (against quiet in its round) |", "|---|---|"]
    moves += [f"| {name} | {p50_moves(section, name)} |" for name in section["contenders"] if name != "quiet"]
    return "\n".join([*lines[:-1], *moves, "", lines[-1]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=interleave.MIN_ROUNDS)
    parser.add_argument("--seconds", type=float, default=5.0, help="calm calls measured per contender")
    parser.add_argument("--count", type=int, default=100_000, help="log messages per flood call")
    parser.add_argument("--baseline", type=Path, help="also the flood on the project copy in this directory")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--one", choices=[*LEVELS, BEFORE], help="worker: measure one contender")
    args = parser.parse_args()
    if args.one:
        level = LEVELS.get(args.one, LEVELS["flood below"])
        emit(trio.run(measure, level, args.seconds, args.count))
        return 0
    if args.rounds < interleave.MIN_ROUNDS:
        parser.error(f"--rounds {args.rounds}: a comparison needs at least {interleave.MIN_ROUNDS}")
    sizes = ("--seconds", args.seconds, "--count", args.count)

    def contender(name: str, code: Path = ROOT) -> interleave.Measure:
        return lambda _round: worker("bench_log_flood.py", "--one", name, *sizes, code=code, timeout=600)

    contenders = {name: contender(name) for name in LEVELS}
    if args.baseline:
        contenders[BEFORE] = contender(BEFORE, args.baseline.resolve())
    section = interleave.run("log flood", contenders, args.rounds)
    print(table(section))
    print(json.dumps(section))
    if args.json:
        args.json.write_text(json.dumps(section, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
