"""Worker: what the audit journal costs a call, with it and without it in ONE process.

    python benchmarks/bench_journal.py [--rounds 6] [--seq 1500] [--tput 5120] [--inflight 64]

Sequential latency on this VM drifts by more than the journal costs between two
processes; here one supervisor (one connection to benchmarks/minimal_server.py) runs
rounds that alternate between its journal as it is and its journal switched off
(``started``/``finished`` do nothing, rows still go to SQLite, as before the journal).
Each round: ``--seq`` sequential calls (p50 of each) and ``--tput`` calls from
``--inflight`` tasks (calls/s), with the client CPU per call. Prints the medians over
the rounds, and each round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from typing import Any

import trio
from _common import emit, ours_config, quantiles, quiet_logging, server_argv


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from supervisor import Supervisor

    quiet_logging()
    with tempfile.TemporaryDirectory(prefix="bench-journal-") as state_dir:
        async with Supervisor.open(ours_config([("bench", server_argv())]), state_dir=state_dir) as sup:
            journal = sup.journal
            on = (journal.started, journal.finished)
            off = (lambda row: None, lambda row: None)
            async with sup.session() as session:
                turn = await session.begin_turn()

                async def calls(count: int) -> None:
                    for _ in range(count):
                        await turn.call("bench_echo", {"text": "hi"})

                await calls(300)
                rounds: dict[str, list[dict[str, float]]] = {"journal": [], "no journal": []}
                for _ in range(args.rounds):
                    for mode, (started, finished) in (("journal", on), ("no journal", off)):
                        journal.started, journal.finished = started, finished  # type: ignore[method-assign]
                        samples = []
                        cpu = time.process_time()
                        for _ in range(args.seq):
                            begin = time.perf_counter()
                            await calls(1)
                            samples.append((time.perf_counter() - begin) * 1e6)
                        seq_cpu = (time.process_time() - cpu) / args.seq * 1e6
                        per_task = args.tput // args.inflight
                        begin, cpu = time.perf_counter(), time.process_time()
                        async with trio.open_nursery() as nursery:
                            for _ in range(args.inflight):
                                nursery.start_soon(calls, per_task)
                        done = per_task * args.inflight
                        rounds[mode].append(
                            {
                                "seq_p50_us": quantiles(samples)["p50"],
                                "seq_cpu_us": seq_cpu,
                                "tput_calls_s": done / (time.perf_counter() - begin),
                                "tput_cpu_us": (time.process_time() - cpu) / done * 1e6,
                            }
                        )
                journal.started, journal.finished = on  # type: ignore[method-assign]
    medians = {
        mode: {key: statistics.median(r[key] for r in results) for key in results[0]}
        for mode, results in rounds.items()
    }
    return {"medians": medians, "rounds": rounds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seq", type=int, default=1500)
    parser.add_argument("--tput", type=int, default=5120)
    parser.add_argument("--inflight", type=int, default=64)
    args = parser.parse_args()
    result = trio.run(run, args)
    for mode, m in result["medians"].items():
        print(
            f"{mode:>10}: seq p50 {m['seq_p50_us']:.0f} µs (CPU {m['seq_cpu_us']:.0f} µs/call), "
            f"{args.inflight} in flight {m['tput_calls_s']:.0f} calls/s (CPU {m['tput_cpu_us']:.0f} µs/call)",
            file=sys.stderr,
        )
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
