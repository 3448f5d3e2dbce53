"""Golden lines of ``mcp-supervisor stdio``, byte for byte, before the web tier is rewritten.

The command runs as a real subprocess (the installed ``mcp-supervisor stdio``) over the
goldens' config with ``mini`` only; the test writes lines on its stdin and records
every line it writes on stdout, in order: ``initialize``, ``initialized``,
``tools/list``, calls (one with progress), bad lines (not JSON, a batch, one over
``gateway.max_message_bytes``, not an object, an unknown method), and the end (stdin
closed: the exit status and anything written after). Each answer is read before the
next line is sent. ``tests/golden/stdio.txt``; re-record on purpose with

    MCP_SUPERVISOR_UPDATE_GOLDENS=1 .venv/bin/python -m pytest tests/end_to_end/test_golden_stdio.py

Nothing here imports ``supervisor``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import trio

from tests.support.golden_config import BOUND, CLI, DEEP, clean_env, write_config
from tests.support.golden_files import Golden, Masker, show
from tests.support.golden_messages import INITIALIZE, INITIALIZED, rpc

WAIT_S = 20.0


class Stdio:
    """The command's pipes: lines out, lines in, all recorded in ``lines``."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.buffer = b""
        self.lines: list[str] = []

    async def send(self, line: Any) -> None:
        raw = line if isinstance(line, bytes) else json.dumps(line).encode()
        await self.stdin.send_all(raw + b"\n")
        self.lines.append(f">>> {show(raw)}")

    async def receive(self) -> dict[str, Any]:
        """The next line, parsed: only JSON goes to stdout, or this fails."""
        while b"\n" not in self.buffer:
            chunk = await self.stdout.receive_some()
            assert chunk, f"stdout ended; read so far: {self.lines}"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        self.lines.append(f"<<< {show(line)}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def round(self, line: Any, answers: int = 1) -> None:
        """Send ``line``, read ``answers`` lines."""
        await self.send(line)
        for _ in range(answers):
            await self.receive()

    async def end(self) -> None:
        """stdin closed: the rest of stdout, and the exit status."""
        await self.stdin.aclose()
        rest = self.buffer
        while chunk := await self.stdout.receive_some():
            rest += chunk
        self.lines.append(f"--- stdin closed; then on stdout: {show(rest) or '(nothing)'}")
        self.lines.append(f"--- exit status {await self.process.wait()}")


async def test_one_stdio_session(tmp_path: Path) -> None:
    golden = Golden(
        "stdio",
        "One mcp-supervisor stdio session, line by line (>>> written to its stdin, <<< read\n"
        "from its stdout), each answer read before the next line is written.",
        "tests/end_to_end/test_golden_stdio.py",
        Masker(),
    )
    config = write_config(tmp_path, ("mini",))
    command = [*CLI, "stdio", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    with (tmp_path / "stderr.log").open("wb") as stderr:  # its log, for a failure's post-mortem
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=clean_env()
        )
    stdio = Stdio(process)
    try:
        with trio.fail_after(WAIT_S):
            await stdio.round(INITIALIZE)
            await stdio.send(INITIALIZED)
            await stdio.round(rpc(1, "tools/list"))
            await stdio.round(rpc(2, "tools/call", {"name": "mini_echo", "arguments": {"text": "hi"}}))
            progress = {
                "name": "mini_progress",
                "arguments": {"steps": 2, "interval": 0.01},
                "_meta": {"progressToken": "p"},
            }
            await stdio.round(rpc(3, "tools/call", progress), answers=3)
            await stdio.round(rpc(4, "tools/call", {"name": "nope_nothing", "arguments": {}}))
            await stdio.round(rpc(5, "no/such/method"))
            await stdio.round(b"this is not json")
            await stdio.round(b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": ' + DEEP + b"}")
            await stdio.round(b"[" + json.dumps(rpc(6, "ping")).encode() + b"]")
            await stdio.round(b'"a string"')
            await stdio.round(
                b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "pad": "' + b"x" * BOUND + b'"}'
            )
            await stdio.round(rpc(8, "ping"))
            await stdio.end()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    golden.case("a session", ("--- lines", "\n".join(stdio.lines)))
    golden.check()
