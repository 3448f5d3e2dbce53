"""Reload of a real ``mcp-supervisor serve`` process: by SIGHUP, and by ``mcp-supervisor
reload`` (the admin API's ``POST /v1/config/reload``), with live admin tokens."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_serve_status import CLI, MINI, spawn_serve

OLD_TOKEN, NEW_TOKEN = "old-operator-token-0123456789", "new-operator-token-0123456789"
BOUND_S = 20.0


def write(path: Path, servers: list[str], token: str, **top: Any) -> None:
    entries = {name: {"command": [sys.executable, MINI], "start": "eager"} for name in servers}
    tokens = {token: {"tenant": "ops", "role": "operator"}}
    path.write_text(json.dumps({"servers": entries, "admin": {"tokens": tokens}, **top}))


def get(url: str, token: str) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def states(url: str, token: str) -> dict[str, str]:
    return {s["name"]: s["state"] for s in get(f"{url}/v1/servers", token)["servers"]}


def pid(url: str, token: str, name: str) -> str:
    transport = get(f"{url}/v1/servers/{name}", token)["transport"] or ""
    match = re.search(r"pid=(\d+)", transport)
    assert match, transport
    return match.group(1)


def wait_for(predicate: Any) -> None:
    """Until ``predicate()`` holds; a 401 counts as not yet (a reload brings the token)."""
    deadline = time.monotonic() + BOUND_S
    while True:
        try:
            if predicate():
                return
        except urllib.error.HTTPError as exc:
            if exc.code != 401:
                raise
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def reload(url: str, token: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [*CLI, "reload", "--url", url, "--token", token, *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str, subprocess.Popen[str]]]:
    config = tmp_path / "config.json"
    write(config, ["a"], OLD_TOKEN)
    serve, url = spawn_serve(config, tmp_path / "s")
    try:
        wait_for(lambda: states(url, OLD_TOKEN) == {"a": "steady"})
        yield config, url, serve
    finally:
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=20) == 0


def test_sighup_reloads_a_running_serve(served: tuple[Path, str, subprocess.Popen[str]]) -> None:
    config, url, serve = served
    a_pid = pid(url, OLD_TOKEN, "a")
    write(config, ["a", "b"], NEW_TOKEN)  # a new server, and the token replaced
    serve.send_signal(signal.SIGHUP)
    wait_for(lambda: states(url, NEW_TOKEN) == {"a": "steady", "b": "steady"})
    assert pid(url, NEW_TOKEN, "a") == a_pid  # untouched
    with pytest.raises(urllib.error.HTTPError) as old:
        get(f"{url}/v1/servers", OLD_TOKEN)
    assert old.value.code == 401  # the tokens applied live
    assert serve.stderr is not None
    line = ""
    while "config reloaded" not in line:
        line = serve.stderr.readline()
    assert "trigger=SIGHUP" in line and "started=b" in line and "live=admin.tokens" in line
    assert NEW_TOKEN not in line


def test_the_reload_command_applies_or_refuses(
    served: tuple[Path, str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    config, url, _serve = served
    unchanged = reload(url, OLD_TOKEN)
    assert (unchanged.returncode, unchanged.stderr) == (0, "")
    assert unchanged.stdout == f"reloaded {config}\n  nothing changed\n"

    write(config, ["b"], OLD_TOKEN)
    done = reload(url, OLD_TOKEN)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == ["  started: b", "  stopped: a"]
    assert states(url, OLD_TOKEN).keys() == {"b"}

    config.write_text('{"servers": {"b": {"command": 1}}}')
    bad = reload(url, OLD_TOKEN)
    assert bad.returncode == 2 and bad.stdout == ""
    assert re.fullmatch(r"config error: \S*config\.json: \$\.servers\.b\.command: .*\n", bad.stderr), (
        bad.stderr
    )

    write(config, ["b", "c"], OLD_TOKEN, state_dir=str(tmp_path / "elsewhere"))
    moved = reload(url, OLD_TOKEN)
    assert moved.returncode == 2
    assert moved.stderr.startswith(f"reload refused: {config}: $.state_dir: changed ("), moved.stderr
    assert "a restart of mcp-supervisor is needed" in moved.stderr
    assert states(url, OLD_TOKEN).keys() == {"b"}  # nothing changed

    write(config, ["b", "c"], OLD_TOKEN)
    as_json = reload(url, OLD_TOKEN, "--json")
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout) == {
        "config": str(config),
        "restarted": [],
        "started": ["c"],
        "stopped": [],
        "applied_live": {"servers": {}, "settings": []},
        "new_sessions": [],
    }

    write(config, ["b", "c"], NEW_TOKEN, admin={"tokens": {NEW_TOKEN: "alice"}})
    tenant = reload(url, OLD_TOKEN)
    assert tenant.returncode == 0  # the old operator token asked; the new one is a tenant's
    refused = reload(url, NEW_TOKEN)
    assert refused.returncode == 1
    assert "needs the operator role; this token has the tenant role" in refused.stderr
