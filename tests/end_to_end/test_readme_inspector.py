"""The README's inspector commands, run as written against the demo it starts first.

The README's first command runs the demo (``serve --config config/demo.json``, on
127.0.0.1:8765); its "Connecting the MCP Inspector" block is then run line by line,
unchanged, from the repository root, with the inspector .ci/setup installs; its
``/mcp`` commands once more against a config with more tools than ``tool_search``'s
threshold, where the one-shot ``tools/call`` finds its tool by name. Skips, saying why,
only when that inspector could not be installed here or the demo's port is taken.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO, SERVERS

INSPECTOR = REPO / ".venv" / "node" / "node_modules" / ".bin" / "mcp-inspector"
DEMO = "127.0.0.1", 8765


def inspector_block() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Connecting the MCP Inspector") :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the inspector section has no sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


@contextmanager
def demo(state: Path, config: str = "config/demo.json") -> Iterator[None]:
    """The README's first command (without its ``.ci/setup``), until the block is done
    (``config``: the demo's, or one with more servers). The tests that run it take
    turns, across xdist's processes too (a lock file): both need the demo's port."""
    with open(Path(tempfile.gettempdir()) / "mcp-supervisor-demo-port.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with _demo(state, config):
            yield


@contextmanager
def _demo(state: Path, config: str) -> Iterator[None]:
    with socket.socket() as probe:
        if probe.connect_ex(DEMO) == 0:
            pytest.skip("something already listens on 127.0.0.1:8765, the demo's address")
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    command = [str(REPO / ".venv" / "bin" / "mcp-supervisor"), "serve", "--config", config]
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


def needs_inspector() -> None:
    if not INSPECTOR.exists():
        pytest.skip(
            "@modelcontextprotocol/inspector is not installed: npm is missing or could not install it"
        )


def run(line: str, env: dict[str, str]) -> dict[str, Any]:
    """One line of the block, as written, from the repository root; its JSON answer."""
    done = subprocess.run(
        ["bash", "-c", line], cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, (line, done.stdout, done.stderr)
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def test_the_readmes_inspector_commands_run_as_written(tmp_path: Path) -> None:
    needs_inspector()
    lines = inspector_block()
    assert len(lines) == 3 and all(
        line.startswith(".venv/node/node_modules/.bin/mcp-inspector ") for line in lines
    )
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    with demo(tmp_path / "state"):
        listed, called, over_stdio = (run(line, env) for line in lines)
    names = {tool["name"] for tool in listed["tools"]}
    assert "time_get_current_time" in names and "tool_search" not in names  # under 20: all shown
    assert not called.get("isError") and '"timezone": "UTC"' in called["content"][0]["text"]
    assert "time_get_current_time" in {tool["name"] for tool in over_stdio["tools"]}


def test_the_one_shot_call_works_past_tool_searchs_threshold(tmp_path: Path) -> None:
    """The block's ``/mcp`` commands, as written, against the demo plus a server of 34
    tools (46 in all, over the threshold of 20): the listing shows only ``tool_search``,
    and the call by exact name runs all the same (each command is a session of its own)."""
    needs_inspector()
    demo_config = json.loads((REPO / "config" / "demo.json").read_text(encoding="utf-8"))
    servers = {name: {**server, "cwd": str(REPO)} for name, server in demo_config["servers"].items()}
    servers["many"] = {
        "command": [sys.executable, str(SERVERS / "mini_server.py"), "--tools", "25"],
        "start": "eager",
    }
    config = tmp_path / "many.json"
    config.write_text(json.dumps({**demo_config, "servers": servers}), encoding="utf-8")
    lines = [line for line in inspector_block() if "http://127.0.0.1:8765/mcp" in line]
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    with demo(tmp_path / "state", str(config)):
        listed, called = (run(line, env) for line in lines)
    assert [tool["name"] for tool in listed["tools"]] == ["tool_search"]
    assert not called.get("isError") and '"timezone": "UTC"' in called["content"][0]["text"]
