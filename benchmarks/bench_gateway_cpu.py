"""The front's own CPU per ``/mcp`` call, interleaved: what bounds calls/s on 2 cores (by hand only).

    python benchmarks/bench_gateway_cpu.py [--rounds 5] [--calls 1000] [--seconds 3]
                                           [--only ours ours-lean mcp-proxy] [--baseline DIR]

On a machine shared with other work, the wall-clock numbers of ``bench_fronts.py``
swing with the neighbours (calls/s ranges of 2x in one run); a front's CPU time per
call moves far less. Each contender (``fronts.py``'s fronts; ``ours-before``: ours
from ``--baseline DIR``, a checkout of another commit) is started fresh every round
and measured by this process as ``bench_fronts.py`` measures it (the SDK's client, one
echo per call, a stdio backend): the front process's user+system CPU (``/proc``, its
threads included, its children not: our folder process and the backend are not in it)
over ``--calls`` sequential calls on one session, and over ``--seconds`` of 16
sessions calling at once, divided by the calls made. ``interleave.py`` orders the
rounds; prints the medians (min-max) and the ratios against ``ours``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import interleave  # noqa: E402
from _common import ROOT  # noqa: E402
from fronts import Front, session, tool_names  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (its threads, not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def _measure(front: Front, calls: int, seconds: float) -> dict[str, float]:
    assert front.process is not None
    pid = front.process.pid
    async with session(front.url) as client:
        echo = (await tool_names(client))["echo"]
        for _ in range(30):
            await client.call_tool(echo, {"text": "warm"})
        began = cpu_s(pid)
        for i in range(calls):
            await client.call_tool(echo, {"text": f"call {i}"})
        sequential = (cpu_s(pid) - began) / calls
    async with trio.open_nursery() as nursery:
        clients = []
        for _ in range(16):
            clients.append(await nursery.start(_one_session, front.url, echo))
        began, start = cpu_s(pid), time.perf_counter()
        end = start + seconds
        for task_done in clients:
            task_done.send_nowait(end)
    elapsed = time.perf_counter() - start
    spent = cpu_s(pid) - began
    made = sum(_counts)
    _counts.clear()
    return {
        "cpu_us_per_call_seq": sequential * 1e6,
        "cpu_us_per_call_16": spent / max(made, 1) * 1e6,
        "calls_per_s_16": made / elapsed,
    }


_counts: list[int] = []
"""The calls each of the 16 sessions made (this process measures one front at a time)."""


async def _one_session(url: str, echo: str, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """One of the 16 sessions: opened and warmed, then calling until the end it is sent."""
    go_send, go_receive = trio.open_memory_channel[float](1)
    async with session(url) as client:
        await client.call_tool(echo, {"text": "warm"})
        task_status.started(go_send)
        end = await go_receive.receive()
        made = 0
        while time.perf_counter() < end:
            await client.call_tool(echo, {"text": "s"})
            made += 1
        _counts.append(made)


def measure(name: str, code: Path, calls: int, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-gateway-cpu-") as tmp:
        front = Front(name, Path(tmp), "", code)
        front.start()
        try:
            return trio.run(_measure, front, calls, seconds)
        finally:
            front.stop()


def _cell(result: dict[str, Any], name: str, key: str) -> str:
    value = interleave.metric(result, name, key)
    return "error" if value is None else f"{value['median']:.0f} ({value['min']:.0f}-{value['max']:.0f})"


def main() -> None:
    how = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=how)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--only", nargs="+", default=["ours", "ours-lean", "mcp-proxy"])
    parser.add_argument("--baseline", type=Path, help="a checkout of another commit: the ours-before row")
    args = parser.parse_args()
    contenders: dict[str, interleave.Measure] = {}
    for name in args.only:
        contenders[name] = lambda _round, name=name: measure(name, ROOT, args.calls, args.seconds)
    if args.baseline is not None:
        baseline = args.baseline.resolve()
        contenders["ours-before"] = lambda _round: measure("ours", baseline, args.calls, args.seconds)
    result = interleave.run("gateway-cpu", contenders, args.rounds)
    marker = result["interleaved"]
    load = f"{marker['load_start']:.2f} -> {marker['load_end']:.2f}"
    print(f"{args.rounds} rounds interleaved; load average {load}")
    keys = ("cpu_us_per_call_seq", "cpu_us_per_call_16", "calls_per_s_16")
    print("| front | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name in result["contenders"]:
        print(f"| {name} | " + " | ".join(_cell(result, name, key) for key in keys) + " |")
    for name in result["contenders"]:
        if name != "ours":
            ratios = [interleave.ratio("gateway-cpu", result, name, "ours", key) for key in keys]
            shown = ", ".join(f"{key} {r:.3f}x" for key, r in zip(keys, ratios, strict=True) if r is not None)
            print(f"{name} / ours: {shown}")


if __name__ == "__main__":
    main()
