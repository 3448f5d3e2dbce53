"""Worker: a pydantic-ai agent's tool call, in-process or through ``serve``'s ``/mcp``, one round.

    python benchmarks/bench_agent.py --via inproc|mcp [--seq N] [--tput N] [--inflight 16] [--warmup N]

The same agent either way: pydantic-ai's ``Agent`` with a scripted ``FunctionModel`` that,
in each run, calls the minimal server's ``echo`` (``{"text": "hi"}``, as ``bench_echo``)
once and then answers. Its tools:

* ``inproc``: ``SupervisedToolset`` (``supervisor/adapters/pydantic_ai.py``) over a
  ``supervisor.aio`` session in this process: a turn per run step, the call through it;
* ``mcp``: pydantic-ai's own ``MCPToolset`` (on the FastMCP client, tools listed once and
  cached: its default) connected to ``serve``'s ``/mcp``, a fresh ``serve`` per round
  started by this worker, the same server behind it.

Both reach the minimal server (benchmarks/minimal_server.py) over a pipe. Sequential:
``--seq`` runs one after another; ``seq_us`` is what the tool call adds to a run, from
the model's tool call to its next request (pydantic-ai running the tool, and in-process
the next step's turn), ``run_us`` the whole run. Throughput: ``--tput`` runs over
``--inflight`` tasks on the one agent; ``tput_calls_s`` is tool calls (= runs) per
second. CPU per call is this process's (``serve``'s is not counted for ``mcp``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import ROOT, code_env, emit, free_port, ours_config, quantiles, quiet_logging, server_argv
from _common import supervisor_argv as serve_argv
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import AbstractToolset

TOOL = "bench_echo"


class Scripted:
    """The model: a tool call, then an answer; in sequential runs, it times the call."""

    def __init__(self) -> None:
        self.timing = False
        self.called_at = 0.0
        self.calls_us: list[float] = []
        self.model = FunctionModel(self._respond)

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
        if not returned:
            self.called_at = time.perf_counter()
            return ModelResponse(parts=[ToolCallPart(TOOL, {"text": "hi"})])
        if self.timing:
            self.calls_us.append((time.perf_counter() - self.called_at) * 1e6)
        assert returned[0].outcome == "success" and returned[0].content == "hi", returned[0]
        return ModelResponse(parts=[TextPart("done")])


async def measure(toolset: AbstractToolset[None], args: argparse.Namespace) -> dict[str, Any]:
    """Warm up, time ``--seq`` runs one after another, then ``--tput`` runs in flight."""
    scripted = Scripted()
    agent = Agent(scripted.model, toolsets=[toolset])
    async with agent:  # the toolset entered once (for MCP: one session for every run)

        async def run() -> None:
            assert (await agent.run("go")).output == "done"

        for _ in range(args.warmup):
            await run()
        runs_us: list[float] = []
        scripted.timing = True
        cpu_start = time.process_time()
        for _ in range(args.seq):
            start = time.perf_counter()
            await run()
            runs_us.append((time.perf_counter() - start) * 1e6)
        seq_cpu = (time.process_time() - cpu_start) / max(args.seq, 1) * 1e6
        scripted.timing = False
        await _in_flight(run, args.tput, args.inflight)  # as warm as the sequential phase
        start, cpu_start = time.perf_counter(), time.process_time()
        await _in_flight(run, args.tput, args.inflight)
        elapsed = time.perf_counter() - start
    return {
        "seq_us": quantiles(scripted.calls_us),
        "run_us": quantiles(runs_us),
        "seq_cpu_us_per_call": seq_cpu,
        "tput_calls_s": args.tput / elapsed,
        "tput_s": elapsed,
        "tput_cpu_us_per_call": (time.process_time() - cpu_start) / args.tput * 1e6,
    }


async def _in_flight(run: Callable[[], Awaitable[None]], total: int, tasks: int) -> None:
    per_task, extra = divmod(total, tasks)

    async def loop(count: int) -> None:
        for _ in range(count):
            await run()

    async with asyncio.TaskGroup() as group:
        for index in range(tasks):
            group.create_task(loop(per_task + (1 if index < extra else 0)))


async def in_process(args: argparse.Namespace) -> dict[str, Any]:
    from supervisor.adapters.pydantic_ai import SupervisedToolset
    from supervisor.aio import Supervisor

    config = ours_config([("bench", server_argv())], eager=True, search=False)
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as state_dir:
        async with Supervisor.open(config, state_dir=state_dir) as sup, sup.session() as session:
            return await measure(SupervisedToolset(session), args)


async def through_mcp(args: argparse.Namespace, url: str) -> dict[str, Any]:
    from pydantic_ai.mcp import MCPToolset

    return await measure(MCPToolset(url), args)


@contextmanager
def serving(scratch: Path) -> Iterator[str]:
    """``serve`` with the minimal server behind ``/mcp`` (no tokens), once it listens."""
    port = free_port()
    server = {"command": server_argv(), "trusted": True, "start": "eager", "call_timeout_ms": 60_000}
    config = {"admin": {"bind": f"127.0.0.1:{port}"}, "tool_search": {"enabled": False}}
    (scratch / "serve.json").write_text(json.dumps({**config, "servers": {"bench": server}}))
    argv = serve_argv("serve", "--config", str(scratch / "serve.json"), "--state-dir", str(scratch / "state"))
    quiet = subprocess.DEVNULL
    process = subprocess.Popen(argv, cwd=ROOT, env=code_env(ROOT), stdout=quiet, stderr=quiet)
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not listen on {port} (exit status {process.poll()})")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()  # serve stops its servers on SIGTERM
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--via", required=True, choices=["inproc", "mcp"])
    parser.add_argument("--seq", type=int, default=500)
    parser.add_argument("--tput", type=int, default=2000)
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    quiet_logging()
    if args.via == "inproc":
        result = asyncio.run(in_process(args))
    else:
        with tempfile.TemporaryDirectory(prefix="bench-agent-") as scratch, serving(Path(scratch)) as url:
            result = asyncio.run(through_mcp(args, url))
    result["via"] = args.via
    emit(result)


if __name__ == "__main__":
    sys.exit(main())
