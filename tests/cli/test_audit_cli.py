"""``mcp-supervisor audit export`` and ``audit purge --person``, run as the operator runs
them, on a state directory that a real ``mcp-supervisor stdio`` left audit rows in:
the stdio front's person is the local user, an export is JSON lines with arguments
only as a hash, and a purge refuses while a service could write the rows back."""

from __future__ import annotations

import getpass
import json
import re
from pathlib import Path
from typing import Any

import trio

from actors.transports.instances import InstanceLock
from supervisor.store.journal import journal_dir
from tests.gateway.test_stdio_front import CLI, INITIALIZE, mini, rpc, write_config
from tests.support.paths import REPO

SECRET = "hunter2-Very-Secret-8813"


async def audit(*args: str) -> tuple[int, list[dict[str, Any]], str]:
    """Exit status, JSON lines and stderr of one ``mcp-supervisor audit …``."""
    with trio.fail_after(20):
        done = await trio.run_process(
            [str(CLI), "audit", *args], capture_stdout=True, capture_stderr=True, check=False
        )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return done.returncode, lines, done.stderr.decode()


async def stdio_calls(tmp_path: Path, state: Path) -> None:
    """Two calls through a real stdio front, then it ends (its journal folded in)."""
    config = write_config(tmp_path, {"mini": mini(tmp_path)})
    piped = (
        INITIALIZE
        + rpc(2, "tools/call", {"name": "mini_echo", "arguments": {"text": SECRET}})
        + rpc(3, "tools/call", {"name": "mini_add", "arguments": {"a": 1, "b": 2}})
    )
    command = [str(CLI), "stdio", "--config", str(config), "--state-dir", str(state)]
    with trio.fail_after(20):
        done = await trio.run_process(command, stdin=piped, capture_stdout=True, capture_stderr=True)
    assert len(done.stdout.splitlines()) == 3, done.stdout


async def test_stdio_rows_are_the_local_users_and_export_as_json_lines_without_arguments(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    await stdio_calls(tmp_path, state)
    me = getpass.getuser()
    status, rows, _ = await audit("export", "--since", "1h", "--state-dir", str(state))
    assert status == 0
    # The two calls run at once: either may end (and be written) first.
    assert sorted((row["tool"], row["tenant"], row["person"]) for row in rows) == [
        ("mini_add", "default", me),
        ("mini_echo", "default", me),
    ]
    assert rows == sorted(rows, key=lambda row: row["at"])  # oldest first
    [echo] = [row for row in rows if row["tool"] == "mini_echo"]
    assert len(echo["args_sha256"]) == 64 and echo["time"].endswith("Z") and echo["record"]
    assert SECRET not in json.dumps(rows)  # arguments only as their hash
    # --since and --until: an ISO time or a duration ago; --person narrows.
    for narrowed in (
        ["--since", "2999-01-01T00:00:00Z"],
        ["--since", "2000-01-01", "--until", "2000-01-02"],
        ["--since", "30d", "--until", "2h"],
        ["--since", "7d", "--person", "nobody"],
    ):
        status, rows, _ = await audit("export", *narrowed, "--state-dir", str(state))
        assert (status, rows) == (0, []), narrowed
    status, rows, _ = await audit(
        "export", "--since", "2000-01-01", "--person", me, "--state-dir", str(state)
    )
    assert status == 0 and len(rows) == 2
    status, rows, error = await audit("export", "--since", "yesterday", "--state-dir", str(state))
    assert status == 2 and rows == []
    assert "--since 'yesterday': expected an ISO 8601 time" in error and "7d" in error


async def test_purge_by_person_refuses_while_a_service_could_write_the_rows_back(tmp_path: Path) -> None:
    state = tmp_path / "state"
    await stdio_calls(tmp_path, state)
    me = getpass.getuser()
    with InstanceLock.acquire(state, "serve"):  # a service running on the directory
        status, _, error = await audit("purge", "--person", me, "--state-dir", str(state))
    assert status == 3
    assert "a supervisor is running on this state directory" in error and "stop it" in error
    left = journal_dir(state) / "123-0123456789ab.1.jsonl"  # a crashed run's journal, not folded yet
    left.write_text("")
    status, _, error = await audit("purge", "--person", me, "--state-dir", str(state))
    assert status == 3 and "not folded in yet" in error and "start the service once" in error
    left.unlink()

    status, _, said = await audit("purge", "--person", "nobody", "--state-dir", str(state))
    assert status == 0 and "purged 0 audit rows of person 'nobody'" in said
    status, _, said = await audit("purge", "--person", me, "--state-dir", str(state))
    assert status == 0 and f"purged 2 audit rows of person {me!r}" in said
    status, rows, _ = await audit("export", "--since", "1d", "--state-dir", str(state))
    assert (status, rows) == (0, [])


async def test_the_cli_says_what_audit_wants(tmp_path: Path) -> None:
    status, _, error = await audit("purge", "--state-dir", str(tmp_path))
    assert status == 2 and "--person" in error
    status, _, error = await audit("export", "--state-dir", str(tmp_path))
    assert status == 2 and "--since" in error
    missing = tmp_path / "typo"
    status, _, error = await audit("export", "--since", "1d", "--state-dir", str(missing))
    assert status == 3 and error.startswith(f"state error: {missing}: no audit here (no supervisor.db);")
    assert not missing.exists()  # nothing made up


def readme_audit_commands() -> list[list[str]]:
    """The README's ``mcp-supervisor audit …`` lines, their options in brackets left out."""
    found = []
    for line in (REPO / "README.md").read_text().splitlines():
        if line.startswith("mcp-supervisor audit "):
            command = re.sub(r"\[[^\]]*\]", "", line.split("  #")[0])
            found.append(command.split()[1:])
    return found


async def test_the_readmes_audit_commands_run_as_written(tmp_path: Path) -> None:
    state = tmp_path / "state"
    await stdio_calls(tmp_path, state)
    commands = readme_audit_commands()
    assert [command[:2] for command in commands] == [["audit", "export"], ["audit", "purge"]]
    me = getpass.getuser()
    for command in commands:
        argv = [me if word == "P" else word for word in command[1:]]
        status, rows, said = await audit(*argv, "--state-dir", str(state))
        assert status == 0, said
        if command[1] == "export":
            assert [row["person"] for row in rows] == [me, me]
        else:
            assert f"purged 2 audit rows of person {me!r}" in said
