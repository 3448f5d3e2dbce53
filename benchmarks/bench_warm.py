"""Time to a new session's first call on a Python backend, with and without ``warm: 1``.

The backend is ``mcp-server-time`` (the official Python SDK underneath: most of its
start is imports). Each round opens a session, begins a turn (which starts the
session's own ``scope: session`` server: spawn or adopt a spare, ``initialize``,
``tools/list``) and makes one call; the time is from the session's open to the call's
answer. Rounds are ``--gap`` seconds apart, as sessions of real users are, so a spare
has finished importing by the next session; the last lines also show one session
opened right after another (the fresh spare still importing).

Run on its own: ``.venv/bin/python benchmarks/bench_warm.py [--rounds 10] [--gap 1.5]``;
prints one JSON object on its last line (``--warm N``: only that setting, as
``bench_fronts.py`` runs it, interleaved with the other).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from _common import quantiles

from actors.spec import Scope, ServerSpec
from supervisor import Supervisor
from supervisor.settings.model import Config

TOOL, ARGS = "time_get_current_time", {"timezone": "UTC"}


def backend() -> tuple[str, ...]:
    found = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    if found is None:
        raise SystemExit("mcp-server-time is not installed in this virtualenv (.ci/setup installs it)")
    return (found,)


async def first_call_ms(sup: Supervisor) -> float:
    began = time.perf_counter()
    async with sup.session() as session:
        result = await (await session.begin_turn()).call(TOOL, ARGS)
        spent = (time.perf_counter() - began) * 1000
        if not result.ok:
            raise SystemExit(f"the call failed: {result.as_dict()}")
    return spent


async def measure(warm: int, rounds: int, gap_s: float) -> dict[str, Any]:
    spec = ServerSpec(name="time", command=backend(), scope=Scope.SESSION, trusted=True, warm=warm)
    with tempfile.TemporaryDirectory() as state:
        async with Supervisor.open(Config(servers=(spec,)), state_dir=state) as sup:
            spaced = []
            for _ in range(rounds):
                await trio.sleep(gap_s)  # a spare (if any) has imported by now
                spaced.append(await first_call_ms(sup))
            back_to_back = [await first_call_ms(sup) for _ in range(3)]
    return {"warm": warm, "spaced_ms": quantiles(spaced), "back_to_back_ms": back_to_back}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--gap", type=float, default=1.5)
    parser.add_argument(
        "--warm", type=int, help="measure only this warm setting (a worker of bench_fronts.py)"
    )
    args = parser.parse_args()
    if args.warm is not None:
        print(json.dumps(await measure(args.warm, args.rounds, args.gap)))
        return
    out = {f"warm {w}": await measure(w, args.rounds, args.gap) for w in (0, 1)}
    for name, row in out.items():
        q = row["spaced_ms"]
        tail = ", ".join(f"{ms:.0f}" for ms in row["back_to_back_ms"])
        spread = f"p50 {q['p50']:.1f} ms, min {q['min']:.1f}, max {q['max']:.1f} (n={q['n']})"
        print(f"{name}: {spread}; back to back: {tail} ms")
    print(json.dumps(out))


if __name__ == "__main__":
    trio.run(main)
