"""``mcp-supervisor check`` and ``serve`` as an operator runs them: real subprocesses.

The contracts they check: a bad config file stops with ``config error: <file>: <json
path>: <problem>`` and exit status 2; the admin API binds loopback only, unless
``--allow-non-loopback`` *and* admin tokens; log lines are structured (one line per
event, ``server=`` and ``state=`` on every state line) and redacted. The ``serve`` runs
start real MCP servers (``mini_server.py``) and check that SIGTERM/SIGINT stops them in
reverse order and leaves no process of the supervisor's tree behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from actors.connection.states import State
from actors.transports.pidfiles import read_proc_stat
from supervisor.cli import main as cli
from supervisor.cli.main import check_bind
from supervisor.settings.loader import CONFIG_ENV_VAR
from supervisor.settings.model import AdminSettings, Config
from supervisor.settings.signin import IssuerSettings, SigninSettings
from tests.support.paths import REPO

MINI = REPO / "tests" / "servers" / "mini_server.py"
DEMO = REPO / "config" / "demo.json"
CLI = [sys.executable, "-m", "supervisor.cli"]
CONSOLE_SCRIPT = Path(sys.executable).with_name("mcp-supervisor")
PLANTED = "s3cr3t-planted-value-xyz"
PLANTED_ADMIN = "adm1n-planted-token-uvw"

LINE = re.compile(
    r"(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (?P<level>debug|info|warning|error|critical) +"
    r"(?P<rest>\S.*)\Z"
)
PAIR = re.compile(r' (?P<key>[A-Za-z_]\w*)=(?P<value>"(?:[^"\\]|\\.)*"|[^\s"]+)')
TAIL = re.compile(f"(?:{PAIR.pattern})+")
STATES = {state.value for state in State}


# ------------------------------------------------------------------ helpers


def clean_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != CONFIG_ENV_VAR}
    env.update(extra)
    return env


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, argv0: Sequence[str] = CLI
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*argv0, *args],
        env=env if env is not None else clean_env(),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )


def write_config(path: Path, servers: dict[str, Any], **top: Any) -> Path:
    path.write_text(json.dumps({"servers": servers, **top}))
    return path


def mini(*flags: str, **extra: Any) -> dict[str, Any]:
    """An eager server entry running mini_server.py with ``flags``."""
    return {
        "command": [sys.executable, str(MINI), *flags],
        "start": "eager",
        "reconnect_schedule_s": [0.1],
        **extra,
    }


def parse(line: str) -> tuple[str, str, dict[str, Any]]:
    """(level, event, fields) of a text log line; fails unless it has the structured shape
    (timestamp, level, event, then key=value fields)."""
    match = LINE.fullmatch(line)
    assert match, f"not a structured log line: {line!r}"
    rest = match["rest"]
    for start in (i for i, ch in enumerate(rest) if ch == " "):
        if TAIL.fullmatch(rest, start):
            fields = {
                m["key"]: json.loads(m["value"]) if m["value"].startswith('"') else m["value"]
                for m in PAIR.finditer(rest, start)
            }
            return match["level"], rest[:start], fields
    return match["level"], rest, {}


def states(lines: Sequence[str]) -> list[tuple[int, str, str]]:
    """(line index, server, state) of every state line."""
    found = []
    for index, line in enumerate(lines):
        _, event, fields = parse(line)
        if event == "state":
            found.append((index, fields["server"], fields["state"]))
    return found


def first(lines: Sequence[str], server: str, state: str, after: int = -1) -> int | None:
    return next(
        (i for i, name, st in states(lines) if i > after and name == server and st == state),
        None,
    )


def _alive(pid: int, start_time: int) -> bool:
    stat = read_proc_stat(pid)
    # A zombie re-parented to a PID 1 that does not reap holds nothing but a pid.
    return stat is not None and stat.start_time == start_time and stat.state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Serve:
    """``mcp-supervisor serve`` in a subprocess: its stderr lines and its process tree."""

    def __init__(self, args: Sequence[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [*CLI, "serve", *args],
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        # pid -> (start_time, cmdline) of every descendant ever seen.
        self.tree: dict[int, tuple[int, str]] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def scan_tree(self) -> None:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (stat := read_proc_stat(int(entry))) is not None:
                children.setdefault(stat.ppid, []).append(stat.pid)
        todo = list(children.get(self.proc.pid, []))
        while todo:
            pid = todo.pop()
            stat = read_proc_stat(pid)
            if stat is not None and stat.state != "Z":
                # Refreshed while alive: a child caught between fork and exec still
                # shows its parent's command line.
                self.tree[pid] = (stat.start_time, _cmdline(pid) or self.tree.get(pid, (0, ""))[1])
            todo.extend(children.get(pid, []))

    def wait_for(self, what: str, predicate: Callable[[list[str]], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.scan_tree()
            lines = list(self.lines)
            if predicate(lines):
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._reader.join(1)
                log = "\n".join(self.lines[-40:])
                pytest.fail(f"gave up waiting for {what} (exit={self.proc.poll()}):\n{log}")
            time.sleep(0.02)

    def stop(self, signum: signal.Signals, timeout: float) -> int:
        self.scan_tree()
        self.proc.send_signal(signum)
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"serve did not exit within {timeout} s of {signum.name}:\n" + "\n".join(self.lines))
        self._reader.join(5)
        return status

    def survivors(self, settle: float = 1.0) -> list[str]:
        deadline = time.monotonic() + settle
        while True:
            alive = [f"{pid} {cmd}" for pid, (start, cmd) in self.tree.items() if _alive(pid, start)]
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.02)

    def kill_everything(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        for pid, (start, _) in self.tree.items():
            if _alive(pid, start):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@contextlib.contextmanager
def serving(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Serve]:
    # port 0: never collide with a real service (or a demo) on the default 8765
    bind = [] if "--bind" in args else ["--bind", "127.0.0.1:0"]
    serve = Serve([*args, *bind, "--state-dir", str(tmp_path / "state")], env or clean_env(), tmp_path)
    try:
        yield serve
    finally:
        serve.kill_everything()  # only does something when the test already failed


def assert_structured(lines: Sequence[str]) -> None:
    assert lines
    for line in lines:
        _, event, fields = parse(line)  # the time/level/event shape, one line each
        if event == "state":
            assert fields.get("server"), line
            assert fields.get("state") in STATES, line


def steady(*servers: str) -> Callable[[list[str]], bool]:
    return lambda lines: all(first(lines, name, "steady") is not None for name in servers)


# ------------------------------------------------------------------ check


def test_check_demo_config_with_the_console_script() -> None:
    result = run_cli("check", "--config", str(DEMO), argv0=[str(CONSOLE_SCRIPT)])
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[0] == f"config ok: {DEMO}"
    assert any(line.startswith("  time [local] ") for line in out), out
    assert any(line.startswith("  flaky [local] ") for line in out), out
    assert out[-1] == "2 server(s)"


def test_check_without_any_config_means_no_servers(tmp_path: Path) -> None:
    result = run_cli("check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["config ok: (no config file: no servers)", "0 server(s)"]


@pytest.mark.parametrize("command", ["check", "serve"])
@pytest.mark.parametrize("via", ["--config", "env"])
def test_a_named_config_file_that_does_not_exist_is_a_config_error(
    tmp_path: Path, command: str, via: str
) -> None:
    missing = tmp_path / "typo.json"
    args = ["--config", str(missing)] if via == "--config" else []
    extra = ["--bind", "127.0.0.1:0", "--state-dir", str(tmp_path / "state")] if command == "serve" else []
    env = clean_env(**({} if via == "--config" else {CONFIG_ENV_VAR: str(missing)}))
    result = run_cli(command, *args, *extra, env=env)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"config error: {missing}: $: ")
    assert "does not exist" in line


def test_check_and_serve_name_unknown_keys_and_servers_alike(tmp_path: Path) -> None:
    """Another host's settings pass in silence; an unknown key and two servers whose tool
    ids differ only in case are named: ``check`` on stderr (exit 0), ``serve`` in its log."""
    lazy = {"command": [sys.executable, str(MINI)]}
    config = write_config(
        tmp_path / "c.json", {"time": lazy, "Time": lazy}, **{"$schema": "x", "inputs": [], "telemetry": {}}
    )
    expected = [
        (
            "$.telemetry",
            "unknown key 'telemetry', ignored: it is no setting of this version of mcp-supervisor (the "
            "known keys are admin, audit, bridge, cluster, console, exposure, gateway, limits, mcp, "
            "mcpServers, secrets_at_rest, servers, signin, state_dir, store, tool_search, tracing, trust); "
            "correct its name, or remove it",
        ),
        (
            "$.servers.Time",
            "server 'Time' and server 'time' give tool ids that differ only in letter case (Time_<tool>, "
            "time_<tool>), easily confused by people and models; rename one of them",
        ),
    ]
    checked = run_cli("check", "--config", str(config))
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.splitlines() == [
        f"config warning: {config}: {path}: {problem}" for path, problem in expected
    ]
    assert checked.stdout.splitlines()[-1] == "2 server(s)"

    def warned(lines: list[str]) -> list[tuple[str, str]]:
        found = [parse(line) for line in lines]
        return [
            (fields["path"], fields["problem"]) for _, event, fields in found if event == "config warning"
        ]

    with serving(tmp_path, "--config", str(config)) as serve:
        serve.wait_for(
            "the admin api", lambda lines: any("admin api listening" in line for line in lines), 10
        )
        assert serve.stop(signal.SIGTERM, timeout=10) == 0
    assert warned(serve.lines) == expected
    assert all(parse(line)[0] == "warning" for line in serve.lines if "config warning" in line)


def test_check_accepts_a_websocket_server(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.json", {"time": mini(), "bridge": {"url": "ws://127.0.0.1:1/v1/bridge"}}
    )
    result = run_cli("check", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert "bridge [websocket] ws://127.0.0.1:1/v1/bridge -> bridge (enabled, lazy, shared, untrusted)" in (
        result.stdout
    )


def test_check_honours_the_environment_variable_and_config_wins(tmp_path: Path) -> None:
    from_env = write_config(tmp_path / "env.json", {"viaenv": mini()})
    from_flag = write_config(tmp_path / "flag.json", {"viaflag": mini(), "other": mini()})
    env = clean_env(**{CONFIG_ENV_VAR: str(from_env)})

    result = run_cli("check", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"config ok: {from_env}"
    assert "  viaenv [local] " in result.stdout
    assert result.stdout.splitlines()[-1] == "1 server(s)"

    result = run_cli("check", "--config", str(from_flag), env=env)
    assert result.returncode == 0, result.stderr
    assert "viaenv" not in result.stdout and "  viaflag [local] " in result.stdout
    assert result.stdout.splitlines()[-1] == "2 server(s)"


def test_check_masks_expanded_secrets(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.json",
        {"leaky": mini("--calls-log", "${env:PLANTED}", env={"API_TOKEN": "${env:PLANTED}"})},
    )
    result = run_cli("check", "--config", str(config), env=clean_env(PLANTED=PLANTED))
    assert result.returncode == 0, result.stderr
    assert PLANTED not in result.stdout + result.stderr
    assert "--calls-log ***" in result.stdout


MALFORMED = {
    "bad-json": ('{"servers": {"a": {"command": ["x"],}}}', "$"),
    "unknown-key": (json.dumps({"servers": {"a": {"command": ["x"], "comand": ["y"]}}}), "$.servers.a"),
    "unset-env": (
        json.dumps({"servers": {"a": {"command": ["x"], "env": {"K": "${env:UNSET_VAR_FOR_CLI_TEST}"}}}}),
        "$.servers.a.env.K",
    ),
}


@pytest.mark.parametrize("command", ["check", "serve"])
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_config_is_one_line_and_exit_2(tmp_path: Path, command: str, case: str) -> None:
    text, json_path = MALFORMED[case]
    config = tmp_path / f"{case}.json"
    config.write_text(text)
    extra = ["--state-dir", str(tmp_path / "state")] if command == "serve" else []
    result = run_cli(command, "--config", str(config), *extra)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    prefix = f"config error: {config}: {json_path}: "
    assert lines[0].startswith(prefix), lines[0]
    assert len(lines[0]) > len(prefix)  # names the problem
    if case == "unset-env":
        assert "UNSET_VAR_FOR_CLI_TEST" in lines[0]


def test_config_error_via_environment_variable(tmp_path: Path) -> None:
    config = tmp_path / "bad.json"
    config.write_text("{")
    result = run_cli("check", env=clean_env(**{CONFIG_ENV_VAR: str(config)}))
    assert result.returncode == 2
    assert result.stderr.startswith(f"config error: {config}: $: ")


# ------------------------------------------------------------------ bind


NO_TOKENS = Config()
WITH_TOKENS = Config(admin=AdminSettings(tokens={"a-long-admin-token": "default"}))


@pytest.mark.parametrize(
    "bind",
    ["127.0.0.1:8765", "127.0.0.2:80", "[::1]:8765", "localhost:8765", "LOCALHOST:8765", "127.0.0.1:0"],
)
@pytest.mark.parametrize("config", [NO_TOKENS, WITH_TOKENS], ids=["no-tokens", "tokens"])
@pytest.mark.parametrize("allow", [False, True], ids=["default", "allow"])
def test_loopback_binds_are_accepted(bind: str, config: Config, allow: bool) -> None:
    assert check_bind(bind, config, allow) is None


@pytest.mark.parametrize(
    "bind", ["0.0.0.0:8765", "[::]:8765", "10.0.0.5:8765", "example.com:443", "127.1:8765", "[::2]:1"]
)
def test_non_loopback_bind_needs_the_flag_and_tokens(bind: str) -> None:
    refusal = check_bind(bind, WITH_TOKENS, allow_non_loopback=False)
    assert refusal is not None and "--allow-non-loopback" in refusal
    refusal = check_bind(bind, NO_TOKENS, allow_non_loopback=True)
    assert refusal is not None and "tokens" in refusal
    assert check_bind(bind, WITH_TOKENS, allow_non_loopback=True) is None
    signin = SigninSettings("https://mcp.example.com", (IssuerSettings("https://idp.example/", tenant="a"),))
    assert check_bind(bind, Config(signin=signin), allow_non_loopback=True) is None  # sign-in alone will do


@pytest.mark.parametrize(
    "bind",
    ["8765", "127.0.0.1", ":8765", "127.0.0.1:http", "127.0.0.1:99999", "[::1]", "::1:8765", "a b:80"],
)
def test_malformed_bind_is_refused(bind: str) -> None:
    for config, allow in ((NO_TOKENS, False), (WITH_TOKENS, True)):
        refusal = check_bind(bind, config, allow)
        assert refusal is not None and "HOST:PORT" in refusal


@pytest.mark.parametrize(
    ("flags", "reason"),
    [([], "--allow-non-loopback"), (["--allow-non-loopback"], "requires admin tokens")],
    ids=["no-flag", "flag-no-tokens"],
)
def test_serve_refuses_non_loopback_bind(tmp_path: Path, flags: list[str], reason: str) -> None:
    marker = tmp_path / "started"
    config = write_config(tmp_path / "c.json", {"a": {"command": ["touch", str(marker)], "start": "eager"}})
    state_dir = str(tmp_path / "state")
    result = run_cli(
        "serve", "--config", str(config), "--bind", "0.0.0.0:8765", *flags, "--state-dir", state_dir
    )
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcp-supervisor: refusing to bind 0.0.0.0:8765"), lines
    assert reason in lines[0]
    assert not marker.exists()  # nothing was started


# ------------------------------------------------------------------ serve


def test_serve_end_to_end_sigterm(tmp_path: Path) -> None:
    """Two eager servers: ``alpha`` dies every ~1 s and is brought back; ``beta`` ignores
    stdin close and SIGTERM and has a grandchild, so its teardown runs the whole ladder
    (2 s + 2 s default grace, then SIGKILL of the group). SIGTERM: exit 0, servers torn
    down in reverse config order, no process of the tree left."""
    config = write_config(
        tmp_path / "c.json",
        {
            "alpha": mini("--flaky", "1"),
            "beta": mini("--ignore-stdin-close", "--ignore-sigterm", "--spawn-child"),
        },
    )
    with serving(tmp_path, "--config", str(config), "--verbose") as serve:
        serve.wait_for("both servers steady", steady("alpha", "beta"), timeout=10)

        def flaky_came_back(lines: list[str]) -> bool:
            backoff = first(lines, "alpha", "backoff")
            return backoff is not None and first(lines, "alpha", "steady", after=backoff) is not None

        serve.wait_for("alpha to fail and come back", flaky_came_back, timeout=10)
        spawned = [int(m[1]) for line in serve.lines if (m := re.search(r"spawned child pid=(\d+)", line))]
        assert len(spawned) == 1, serve.lines

        assert serve.stop(signal.SIGTERM, timeout=15) == 0
        lines, leftovers = serve.lines, serve.survivors()  # before the cleanup kills any

    assert_structured(lines)
    stopping = next(i for i, line in enumerate(lines) if parse(line)[1] == "stopping")
    assert parse(lines[stopping])[2] == {"signal": "SIGTERM"}
    order = [(name, st) for i, name, st in states(lines) if i > stopping and st in ("teardown", "stopped")]
    # One at a time, in reverse config order.
    assert order == [
        ("beta", "teardown"),
        ("beta", "stopped"),
        ("alpha", "teardown"),
        ("alpha", "stopped"),
    ], "\n".join(lines)
    assert parse(lines[-1])[1] == "supervisor stopped"

    # The tree we saw: two incarnations of alpha, beta, and beta's grandchild.
    commands = [cmd for _, cmd in serve.tree.values()]
    assert sum("--flaky" in cmd for cmd in commands) >= 2, commands
    assert sum("--spawn-child" in cmd for cmd in commands) == 1, commands
    assert spawned[0] in serve.tree and "sleep 1000" in serve.tree[spawned[0]][1], serve.tree
    assert leftovers == []


def test_serve_sigint_is_like_sigterm(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.json", {"one": mini(), "two": mini("--spawn-child")})
    with serving(tmp_path, "--config", str(config), "--bind", "localhost:0") as serve:
        serve.wait_for("both servers steady", steady("one", "two"), timeout=10)
        assert serve.stop(signal.SIGINT, timeout=10) == 0
        lines, leftovers = serve.lines, serve.survivors()  # before the cleanup kills any

    assert_structured(lines)
    assert not any("Traceback" in line or "KeyboardInterrupt" in line for line in lines), lines
    stopping = [parse(line)[2] for line in lines if parse(line)[1] == "stopping"]
    assert stopping == [{"signal": "SIGINT"}]
    order = [(name, st) for _, name, st in states(lines) if st in ("teardown", "stopped")]
    assert order == [("two", "teardown"), ("two", "stopped"), ("one", "teardown"), ("one", "stopped")]
    commands = [cmd for _, cmd in serve.tree.values()]
    assert sum(str(MINI) in cmd for cmd in commands) == 2 and any("sleep 1000" in cmd for cmd in commands), (
        commands
    )
    assert leftovers == []


def test_a_second_sigint_during_shutdown_is_acknowledged_not_a_traceback(tmp_path: Path) -> None:
    """The server ignores stdin close and SIGTERM, so its teardown takes its whole grace:
    the second SIGINT lands in the middle of it."""
    config = write_config(tmp_path / "c.json", {"slow": mini("--ignore-stdin-close", "--ignore-sigterm")})
    with serving(tmp_path, "--config", str(config)) as serve:
        serve.wait_for("the server steady", steady("slow"), timeout=10)
        serve.proc.send_signal(signal.SIGINT)
        serve.wait_for("its teardown", lambda lines: first(lines, "slow", "teardown") is not None, timeout=10)
        assert serve.stop(signal.SIGINT, timeout=15) == 0
        lines = serve.lines

    assert not any("Traceback" in line or "KeyboardInterrupt" in line for line in lines), lines
    assert_structured(lines)
    events = [(parse(line)[1], parse(line)[2]) for line in lines]
    assert ("stopping", {"signal": "SIGINT"}) in events
    assert ("already stopping", {"signal": "SIGINT", "waiting_for": "servers to stop"}) in events
    assert [name for name, _ in events].count("stopping") == 1
    assert parse(lines[-1])[1] == "supervisor stopped"


LEAKY_SERVER = """\
import os, sys
sys.stderr.write(os.environ["API_TOKEN"] + "\\n")
sys.stderr.write(os.environ["PLANTED_ADMIN"] + "\\n")
sys.stderr.flush()
sys.exit(1)
"""


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_serve_never_logs_a_planted_secret(tmp_path: Path, log_format: str) -> None:
    """End to end: the server prints two secrets bare (no ``token=`` to give them away)
    and exits 1, so they reach debug stderr lines and the failure reason of every
    backoff. ``API_TOKEN`` is a server secret; ``PLANTED_ADMIN`` an admin token the
    server inherits. (The transport and the log formatter both redact; the in-process
    test at the end of this file pins the formatter's part.)"""
    script = tmp_path / "leaky.py"
    script.write_text(LEAKY_SERVER)
    config = write_config(
        tmp_path / "c.json",
        {
            "leaky": {
                "command": [sys.executable, str(script)],
                "env": {"API_TOKEN": "${env:PLANTED}"},
                "start": "eager",
                "reconnect_schedule_s": [0.1],
            }
        },
        admin={"tokens": {"${env:PLANTED_ADMIN}": "default"}},
    )
    env = clean_env(PLANTED=PLANTED, PLANTED_ADMIN=PLANTED_ADMIN)
    args = ["--config", str(config), "--verbose", "--log-format", log_format]
    with serving(tmp_path, *args, env=env) as serve:

        def records(lines: list[str]) -> list[dict[str, Any]]:
            if log_format == "json":
                return [json.loads(line) for line in lines]
            return [{"event": parse(line)[1], **parse(line)[2]} for line in lines]

        def failed_twice(lines: list[str]) -> bool:
            return sum(1 for r in records(lines) if r.get("state") == "backoff") >= 2

        serve.wait_for("two failures of the leaky server", failed_twice, timeout=10)
        assert serve.stop(signal.SIGTERM, timeout=10) == 0
        lines, leftovers = serve.lines, serve.survivors()  # before the cleanup kills any

    output = "\n".join(lines)
    assert PLANTED not in output and PLANTED_ADMIN not in output
    assert "s3cr3t" not in output and "adm1n" not in output  # not even a fragment
    backoffs = [r for r in records(lines) if r.get("state") == "backoff"]
    assert backoffs and all("last stderr line: ***" in r["reason"] for r in backoffs), backoffs
    stderr_lines = [
        r["line"] for r in records(lines) if r["event"] == "stderr" and r.get("server") == "leaky"
    ]
    assert "***" in stderr_lines and len(set(stderr_lines)) == 1, stderr_lines
    if log_format == "json":
        assert all({"time", "level", "event"} <= set(json.loads(line)) for line in lines)
    else:
        assert_structured(lines)
    assert leftovers == []


@pytest.fixture
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


@pytest.mark.usefixtures("restore_root_logger")
def test_serve_logs_mask_every_secret_of_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In-process: whatever the running supervisor logs passes a redactor that knows
    the config's secrets (here an admin token, which no transport knows about)."""
    config = write_config(tmp_path / "c.json", {}, admin={"tokens": {"${env:PLANTED_ADMIN}": "default"}})
    monkeypatch.setenv("PLANTED_ADMIN", PLANTED_ADMIN)

    async def fake_serve(config: Config, state_dir: str | None, *_: object) -> None:
        logging.getLogger("actors.connection").warning("peer said %s", PLANTED_ADMIN)

    monkeypatch.setattr(cli, "_serve", fake_serve)
    state_dir = str(tmp_path / "state")
    assert (
        cli.main(["serve", "--config", str(config), "--state-dir", state_dir, "--bind", "127.0.0.1:0"]) == 0
    )
    err = capsys.readouterr().err
    assert PLANTED_ADMIN not in err
    assert " warning peer said ***" in err


def test_serve_exits_1_when_the_supervisor_gives_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from supervisor.cli import main as cli
    from supervisor.runtime.one_for_one import SupervisorGaveUp

    async def crashing_serve(config: object, state_dir: object, *_: object) -> None:
        raise ExceptionGroup("nursery", [ExceptionGroup("inner", [SupervisorGaveUp("time crashed 4 times")])])

    monkeypatch.setattr(cli, "_serve", crashing_serve)
    # A state dir of its own: the default one (the user's home) is never a test's.
    assert cli.main(["serve", "--bind", "127.0.0.1:0", "--state-dir", str(tmp_path / "state")]) == 1


def test_serve_says_clearly_when_the_admin_port_is_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    from supervisor.cli import main as cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = cli.main(["serve", "--bind", f"127.0.0.1:{port}", "--state-dir", str(tmp_path / "state")])
    err = capsys.readouterr().err
    assert code == 1
    assert f"127.0.0.1:{port}" in err and "Traceback" not in err


def test_serve_binds_before_it_starts_any_server(tmp_path: Path) -> None:
    import socket

    marker = tmp_path / "started"
    config = write_config(tmp_path / "c.json", {"a": {"command": ["touch", str(marker)], "start": "eager"}})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            "serve",
            "--config",
            str(config),
            "--bind",
            f"127.0.0.1:{port}",
            "--state-dir",
            str(tmp_path / "s"),
        )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"mcp-supervisor: the admin API cannot listen on 127.0.0.1:{port}: Address already in use; "
        "is another mcp-supervisor running there? choose another address with --bind (or admin.bind "
        "in the config)"
    ]
    assert not marker.exists()  # the eager server was never started
