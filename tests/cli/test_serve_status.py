"""`mcp-supervisor serve` in one process, `mcp-supervisor status` in another: the operator
sees the servers, and a crashed one in backoff with its retry countdown."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")
CLI = [sys.executable, "-m", "supervisor.cli"]


def status(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "status", "--url", url, *extra], capture_output=True, text=True, timeout=20)


def spawn_serve(config: Path, state_dir: Path) -> tuple[subprocess.Popen[str], str]:
    """``serve`` on a free loopback port; returns it and its admin URL (from its log)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_SUPERVISOR")}
    serve = subprocess.Popen(
        [*CLI, "serve", "--config", str(config), "--bind", "127.0.0.1:0", "--state-dir", str(state_dir)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert serve.stderr is not None
    url = None
    deadline = time.monotonic() + 20
    while url is None and time.monotonic() < deadline:
        match = re.search(r"admin api listening url=(\S+)", serve.stderr.readline())
        url = match.group(1) if match else None
    if url is None:
        serve.kill()
        serve.wait()
        raise AssertionError("serve never said where the admin API listens")
    return serve, url


def test_status_shows_a_crashed_server_in_backoff_with_its_countdown(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "servers": {
                    "steady": {"command": [sys.executable, MINI], "start": "eager"},
                    "flaky": {
                        "command": [sys.executable, MINI, "--flaky", "0.6"],
                        "start": "eager",
                        "reconnect_schedule_s": [30],
                    },
                }
            }
        )
    )
    serve, url = spawn_serve(config, tmp_path / "s")
    try:
        deadline = time.monotonic() + 20
        table = ""
        while time.monotonic() < deadline:
            table = status(url).stdout
            if re.search(r"^flaky\s+backoff\b", table, re.MULTILINE):
                break
            time.sleep(0.2)
        rows = {line.split()[0]: line for line in table.splitlines()[1:]}
        assert rows["steady"].split()[1] == "steady", table
        assert re.search(
            r"backoff\s+2025-11-25\s+no\s+\d+\s+in \d+s\s+1\s+mcp server flaky closed", rows["flaky"]
        ), table
        assert re.search(r" \(\d+s ago\)$", rows["flaky"]), table  # how old the error is
        as_json = json.loads(status(url, "--json").stdout)
        servers = as_json["servers"] if isinstance(as_json, dict) else as_json
        flaky = next(s for s in servers if s["name"] == "flaky")
        assert flaky["state"] == "backoff" and 0 < flaky["retry_in_s"] <= 33  # 30 s, jittered
    finally:
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=20) == 0
