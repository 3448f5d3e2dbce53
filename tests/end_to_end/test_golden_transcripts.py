"""Golden transcripts: what users see of a scripted run, pinned before the core is reshaped.

One real ``mcp-supervisor serve`` with two real servers (our mini server) goes through
a start, calls, a crash, a reconnect, a ``tools/list_changed``, a restart and a stop.
Along the way the test records the admin API's JSON, the CLI's output and the log
lines, masks what differs from run to run (times, ids, pids, ports, durations), and
compares the result with ``tests/golden/serve_scenario.txt``.

A refactor must leave the transcript identical. A change that is meant to alter what
users see re-records it on purpose, and the diff is reviewed with the change:

    MCP_SUPERVISOR_UPDATE_GOLDENS=1 .venv/bin/python -m pytest tests/end_to_end/test_golden_transcripts.py

Log lines are grouped by server (each server's own lines keep their order; lines of
different servers interleave by timing, which no refactor should have to pin).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import GOLDEN, SERVERS

GOLDEN = GOLDEN / "serve_scenario.txt"
MINI = str(SERVERS / "mini_server.py")
CLI = [sys.executable, "-m", "supervisor.cli"]
UPDATE = os.environ.get("MCP_SUPERVISOR_UPDATE_GOLDENS") == "1"
WAIT_S = 20.0

# ------------------------------------------------------------------ masking

# JSON keys whose values differ from run to run, whatever their type.
_VOLATILE_KEYS = frozenset(
    {
        "since",
        "at",
        "duration_ms",
        "session_id",
        "turn_id",
        "epoch",
        "pid",
        "retry_in_s",
        "next_retry_at",
        "last_error_at",
        "last_error_age_s",
        "uptime_s",
        "request_id",
        "id_",
        "listed_at",
        "started_at",
        "elapsed_s",
    }
)
_LINE_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?"), "<time>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
    (re.compile(r"\b(pid|pids|duration_ms|epoch|retry_in_s|session|turn|elapsed_s)=[\w.,-]+"), r"\1=<n>"),
    (re.compile(r"\bpid \d+"), "pid <n>"),
    (re.compile(r"after \d+(?:\.\d+)? s\b"), "after <n> s"),
    (re.compile(r"\bin \d+s\b"), "in <n>s"),
    (re.compile(r"\((?:\d+[smhd])+ ago\)"), "(<age> ago)"),
    (re.compile(r"\b\d+(?:\.\d+)? ?ms\b"), "<n> ms"),
    (re.compile(r"/tmp/[^\s\"']+"), "<tmp>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<id>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
)


def mask_text(text: str) -> str:
    for pattern, replacement in _LINE_MASKS:
        text = pattern.sub(replacement, text)
    return text


def mask_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: ("<masked>" if k in _VOLATILE_KEYS else mask_json(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_json(v) for v in value]
    if isinstance(value, str):
        return mask_text(value)
    return value


def group_log(lines: list[str]) -> list[str]:
    """Each server's lines in their order, servers by first appearance; the rest first."""
    groups: dict[str, list[str]] = {}
    for line in lines:
        match = re.search(r"\bserver=(\S+)", line)
        groups.setdefault(match.group(1) if match else "", []).append(line)
    return [line for lines_ in groups.values() for line in lines_]


# ------------------------------------------------------------------ the running service


class Service:
    """One ``mcp-supervisor serve`` subprocess and what it logged."""

    def __init__(self, config: Path, state_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_SUPERVISOR")}
        self.process = subprocess.Popen(
            [*CLI, "serve", "--config", str(config), "--bind", "127.0.0.1:0", "--state-dir", str(state_dir)],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.log: list[str] = []
        self.url = ""
        deadline = time.monotonic() + WAIT_S
        while not self.url and time.monotonic() < deadline:
            line = self._line()
            match = re.search(r"admin api listening url=(\S+)", line)
            if match:
                self.url = match.group(1)
        assert self.url, f"serve never said where the admin API listens: {self.log}"

    def _line(self) -> str:
        assert self.process.stderr is not None
        line = self.process.stderr.readline()
        if line:
            self.log.append(line.rstrip("\n"))
        return line

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=WAIT_S) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def cli(self, *args: str) -> tuple[int, str, str]:
        done = subprocess.run(
            [*CLI, *args, "--url", self.url], capture_output=True, text=True, timeout=WAIT_S
        )
        return done.returncode, done.stdout, done.stderr

    def server(self, name: str) -> dict[str, Any]:
        status, body = self.request("GET", f"/v1/servers/{name}")
        assert status == 200, body
        return dict(body)

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT_S
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.05)

    def wait_state(self, name: str, state: str, *, after: float = 0.0) -> None:
        def reached() -> bool:
            view = self.server(name)
            return bool(view["state"] == state and view.get("attempt", 0) >= 0 and _since(view) > after)

        self.wait_for(f"{name} to be {state}", reached)

    def stop(self) -> tuple[int, list[str]]:
        self.process.send_signal(signal.SIGTERM)
        assert self.process.stderr is not None
        rest = self.process.stderr.read()
        self.log.extend(rest.splitlines())
        return self.process.wait(timeout=WAIT_S), self.log


def _since(view: Mapping[str, Any]) -> float:
    since = view.get("since")
    return float(since) if isinstance(since, int | float) else 0.0


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "servers": {
                    "alpha": {"command": [sys.executable, MINI], "start": "eager", "trusted": True},
                    "beta": {
                        "command": [sys.executable, MINI],
                        "start": "eager",
                        "trusted": True,
                        "reconnect_schedule_s": [0.3],
                    },
                }
            }
        )
    )
    running = Service(config, tmp_path / "state")
    try:
        yield running
    finally:
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait()


# ------------------------------------------------------------------ the scenario


class Transcript:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def api(self, title: str, status: int, body: Any) -> None:
        rendered = json.dumps(mask_json(body), indent=1, sort_keys=True, ensure_ascii=False)
        self.parts.append(f"## {title}\nstatus {status}\n{rendered}\n")

    def cli(self, title: str, result: tuple[int, str, str]) -> None:
        code, out, err = result
        with contextlib.suppress(ValueError):  # a table is not JSON
            out = json.dumps(mask_json(json.loads(out)), indent=1, sort_keys=True, ensure_ascii=False)
        out, err = mask_text(out).rstrip(), mask_text(err).rstrip()
        self.parts.append(f"## {title}\nexit {code}\n--- stdout\n{out}\n--- stderr\n{err}\n")

    def text(self) -> str:
        return "\n".join(self.parts)


def test_a_scripted_run_matches_its_golden_transcript(service: Service) -> None:
    out = Transcript()
    service.wait_state("alpha", "steady")
    service.wait_state("beta", "steady")

    out.api("health", *service.request("GET", "/v1/health"))
    out.api("servers after start", *service.request("GET", "/v1/servers"))
    out.cli("cli status --json", service.cli("status", "--json"))
    out.cli("cli tools", service.cli("tools"))
    out.api("tools", *service.request("GET", "/v1/tools"))

    status, session = service.request("POST", "/v1/sessions", {})
    out.api("new session", status, session)
    sid = session["session_id"]
    status, turn = service.request("POST", f"/v1/sessions/{sid}/turns", {})
    out.api("first turn", status, turn)
    tid = turn["turn_id"]
    calls = f"/v1/sessions/{sid}/turns/{tid}/calls"

    def call(title: str, tool: str, arguments: dict[str, Any], path: str = calls) -> None:
        out.api(title, *service.request("POST", path, {"tool": tool, "arguments": arguments}))

    call("call alpha_echo", "alpha_echo", {"text": "hi"})
    call("call alpha_add", "alpha_add", {"a": 2, "b": 3})
    call("call with bad arguments", "alpha_add", {"a": "x"})
    call("call of a tool that fails", "alpha_fail", {})
    call("call of an unknown tool", "nope_nothing", {})
    out.cli("cli call", service.cli("call", "alpha_echo", '{"text": "from the cli"}', "--json"))
    out.cli("cli search", service.cli("search", "add two numbers", "--json"))

    # A crash and the reconnect.
    before = _since(service.server("beta"))
    call("call beta_crash", "beta_crash", {})
    service.wait_state("beta", "steady", after=before)
    beta = service.server("beta")
    out.api("beta after its reconnect", 200, {k: v for k, v in beta.items() if k != "stderr_tail"})
    call("call beta_echo in the old turn", "beta_echo", {"text": "x"})

    # tools/list_changed: the old turn keeps its list, the next turn sees the new tool.
    call("call alpha_add_tool", "alpha_add_tool", {"name": "extra"})

    def listed() -> bool:
        _, tools = service.request("GET", "/v1/tools")
        return any(t.get("id") == "alpha_extra" for t in tools.get("tools", tools) if isinstance(t, dict))

    service.wait_for("alpha_extra to be listed", listed)
    status, turn2 = service.request("POST", f"/v1/sessions/{sid}/turns", {})
    out.api("second turn", status, turn2)
    call("call alpha_extra in the old turn", "alpha_extra", {})

    # An operator restart.
    before = _since(service.server("alpha"))
    out.api("restart alpha", *service.request("POST", "/v1/servers/alpha/restart"))
    service.wait_state("alpha", "steady", after=before)
    alpha = service.server("alpha")
    out.api("alpha after its restart", 200, {k: v for k, v in alpha.items() if k != "stderr_tail"})
    out.api("disable beta", *service.request("POST", "/v1/servers/beta/disable"))
    service.wait_state("beta", "disabled")
    out.cli("cli status after disable", service.cli("status", "--json"))
    out.cli("cli status table", service.cli("status"))
    out.api("delete session", *service.request("DELETE", f"/v1/sessions/{sid}"))

    code, log = service.stop()
    out.parts.append(f"## serve exit\n{code}\n")
    out.parts.append("## log\n" + "\n".join(mask_text(line) for line in group_log(log)) + "\n")

    text = out.text()
    if UPDATE or not GOLDEN.exists():
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"recorded {GOLDEN} for the first time; review and commit it")
    assert text == GOLDEN.read_text(encoding="utf-8")
