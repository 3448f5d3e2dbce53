"""The README's inspector commands, run as written against the demo it starts first.

The README's first command runs the demo (``serve --config config/demo.json``, on
127.0.0.1:8765); its "Connecting the MCP Inspector" block is then run line by line,
unchanged, from the repository root, with the inspector .ci/setup installs. Skips,
saying why, only when that inspector could not be installed here or the demo's port
is taken.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.paths import REPO

INSPECTOR = REPO / ".venv" / "node" / "node_modules" / ".bin" / "mcp-inspector"
DEMO = "127.0.0.1", 8765


def inspector_block() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Connecting the MCP Inspector") :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the inspector section has no sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


@contextmanager
def demo(state: Path) -> Iterator[None]:
    """The README's first command (without its ``.ci/setup``), until the block is done."""
    with socket.socket() as probe:
        if probe.connect_ex(DEMO) == 0:
            pytest.skip("something already listens on 127.0.0.1:8765, the demo's address")
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    command = [str(REPO / ".venv" / "bin" / "mcp-supervisor"), "serve", "--config", "config/demo.json"]
    if not Path(command[0]).exists():
        command[:1] = [sys.executable, "-m", "supervisor.cli"]
    serve = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:8765/v1/health", timeout=1) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert serve.poll() is None, "the demo exited"
            assert time.monotonic() < deadline, "the demo did not answer within 30 s"
            time.sleep(0.1)
        yield
    finally:
        serve.terminate()
        serve.wait(timeout=20)


def test_the_readmes_inspector_commands_run_as_written(tmp_path: Path) -> None:
    if not INSPECTOR.exists():
        pytest.skip(
            "@modelcontextprotocol/inspector is not installed: npm is missing or could not install it"
        )
    lines = inspector_block()
    assert len(lines) == 3 and all(
        line.startswith(".venv/node/node_modules/.bin/mcp-inspector ") for line in lines
    )
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    with demo(tmp_path / "state"):
        answers = []
        for line in lines:
            done = subprocess.run(
                ["bash", "-c", line],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, (line, done.stdout, done.stderr)
            answers.append(json.loads(done.stdout))
    listed, called, over_stdio = answers
    assert "time_get_current_time" in {tool["name"] for tool in listed["tools"]}
    assert not called.get("isError") and '"timezone": "UTC"' in called["content"][0]["text"]
    assert "time_get_current_time" in {tool["name"] for tool in over_stdio["tools"]}
