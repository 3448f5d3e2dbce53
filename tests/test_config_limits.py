"""What the loader refuses beyond types: files that are no files, strings the OS cannot
take, unsafe server names, unbounded timeouts. Every refusal is one ``config error``
line, never a traceback; special files are checked through the real CLI in a
subprocess with a time and memory bound, so a regression fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from supervisor.settings.expansion import MAX_FILE_BYTES
from supervisor.settings.loader import ConfigError, load_config

CLI = [sys.executable, "-m", "supervisor.cli"]
S = "$.servers.s"


def write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def fail(tmp_path: Path, doc: object, environ: dict[str, str] | None = None) -> ConfigError:
    path = write(tmp_path, doc)
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ=environ or {})
    return caught.value


def with_file_env(reference: str) -> dict[str, Any]:
    return {"servers": {"s": {"command": "a", "env": {"K": f"${{file:{reference}}}"}}}}


def _limit_memory() -> None:
    # /dev/zero read whole would take all memory; fail fast instead.
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI, bounded in time (a FIFO would block) and memory (/dev/zero)."""
    env = {key: value for key, value in os.environ.items() if key != "MCP_SUPERVISOR_CONFIG"}
    return subprocess.run(
        [*CLI, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
        preexec_fn=_limit_memory,
    )


def assert_one_config_error(result: subprocess.CompletedProcess[str], config: Path, json_path: str) -> str:
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[-2000:]
    prefix = f"config error: {config}: {json_path}: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix) :]


# --- ${file:…} is bounded -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "kind"),
    [("/dev/zero", "a character device"), ("/dev/urandom", "a character device"), ("fifo", "a named pipe")],
)
def test_special_files_are_refused_without_reading_them(tmp_path: Path, target: str, kind: str) -> None:
    if target == "fifo":
        target = str(tmp_path / "fifo")
        os.mkfifo(target)  # nobody ever writes: opening it for reading would block
    config = write(tmp_path, with_file_env(target))
    problem = assert_one_config_error(run_cli("check", "--config", str(config)), config, f"{S}.env.K")
    assert problem == (
        f"${{file:{target}}} is {kind}, not a regular file ({target}); point it at a file"
    )


def test_symlink_to_a_device_is_refused_and_names_the_target(tmp_path: Path) -> None:
    (tmp_path / "token").symlink_to("/dev/zero")
    config = write(tmp_path, with_file_env("token"))
    problem = assert_one_config_error(run_cli("check", "--config", str(config)), config, f"{S}.env.K")
    assert problem == (
        f"${{file:token}} is a character device, not a regular file "
        f"({tmp_path / 'token'} -> /dev/zero); point it at a file"
    )


def test_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    error = fail(tmp_path, with_file_env("secrets"))
    assert (error.json_path, error.problem) == (
        f"{S}.env.K",
        f"${{file:secrets}} is a directory, not a regular file ({tmp_path / 'secrets'}); "
        "point it at a file",
    )


def test_file_over_one_mib_is_refused_and_one_mib_is_fine(tmp_path: Path) -> None:
    assert MAX_FILE_BYTES == 1024 * 1024
    (tmp_path / "big").write_bytes(b"a" * (MAX_FILE_BYTES + 1))
    error = fail(tmp_path, with_file_env("big"))
    assert (error.json_path, error.problem) == (
        f"{S}.env.K",
        f"${{file:big}} is larger than 1 MiB ({tmp_path / 'big'}); "
        "${file:…} is for secrets and short values, point it at a smaller file",
    )
    (tmp_path / "big").write_bytes(b"a" * MAX_FILE_BYTES)
    (spec,) = load_config(write(tmp_path, with_file_env("big")), environ={}).servers
    assert spec.env["K"] == "a" * MAX_FILE_BYTES


def test_symlink_chain_to_a_regular_file_is_read(tmp_path: Path) -> None:
    # How Kubernetes mounts secrets: token -> ..data/token, ..data -> ..2024_01_01/.
    (tmp_path / "..2024_01_01").mkdir()
    (tmp_path / "..2024_01_01" / "token").write_text("s3cret\n")
    (tmp_path / "..data").symlink_to("..2024_01_01")
    (tmp_path / "token").symlink_to("..data/token")
    (spec,) = load_config(write(tmp_path, with_file_env("token")), environ={}).servers
    assert spec.env["K"] == "s3cret"
    assert "s3cret" in spec.secrets


def test_newlines_inside_a_file_are_kept_as_text_mode_gave_them(tmp_path: Path) -> None:
    (tmp_path / "key.pem").write_bytes(b"-----BEGIN-----\r\nabc\r\n-----END-----\r\n")
    (spec,) = load_config(write(tmp_path, with_file_env("key.pem")), environ={}).servers
    assert spec.env["K"] == "-----BEGIN-----\nabc\n-----END-----"


# --- what reaches the OS holds no NUL ------------------------------------------------------

NUL_PROBLEM = (
    "contains a NUL character, which no program argument, environment variable or path can hold; "
    "remove it"
)
NUL_EXPANDED = (
    "contains a NUL character (it comes from a ${…} reference's value), which no program argument, "
    "environment variable or path can hold; remove it"
)


@pytest.mark.parametrize(
    ("entry", "json_path"),
    [
        ({"command": "a\0b"}, f"{S}.command"),
        ({"command": ["a", "-x\0"]}, f"{S}.command[1]"),
        ({"command": "a", "args": ["ok", "b\0"]}, f"{S}.args[1]"),
        ({"command": "a", "env": {"K": "v\0"}}, f"{S}.env.K"),
        ({"command": "a", "cwd": "dir\0"}, f"{S}.cwd"),
    ],
)  # fmt: skip
def test_nul_in_argv_env_or_cwd_is_refused(tmp_path: Path, entry: dict[str, Any], json_path: str) -> None:
    error = fail(tmp_path, {"servers": {"s": entry}})
    assert (error.json_path, error.problem) == (json_path, NUL_PROBLEM)


@pytest.mark.parametrize("where", ["command", "args", "env", "cwd"])
@pytest.mark.parametrize("source", ["file", "env"])
def test_nul_from_a_reference_is_refused_without_showing_the_value(
    tmp_path: Path, where: str, source: str
) -> None:
    (tmp_path / "secret").write_bytes(b"s3cr3t\0tail\n")
    reference = "${file:secret}" if source == "file" else "${env:SECRET}"
    entry: dict[str, Any] = {"command": "a"}
    json_path = {"command": f"{S}.command", "args": f"{S}.args[0]", "env": f"{S}.env.K", "cwd": f"{S}.cwd"}
    if where == "env":
        entry["env"] = {"K": reference}
    elif where == "args":
        entry["args"] = [reference]
    else:
        entry[where] = reference
    error = fail(tmp_path, {"servers": {"s": entry}}, {"SECRET": "s3cr3t\0tail"})
    assert (error.json_path, error.problem) == (json_path[where], NUL_EXPANDED)
    assert "s3cr3t" not in str(error)


def test_nul_in_an_env_name_or_a_header_or_the_state_dir_is_refused(tmp_path: Path) -> None:
    error = fail(tmp_path, {"servers": {"s": {"command": "a", "env": {"K\0": "v"}}}})
    assert (error.json_path, error.problem) == (
        f'{S}.env["K\\u0000"]',
        "'K\\x00' is not a valid environment variable name",
    )
    error = fail(tmp_path, {"servers": {"s": {"url": "https://h/", "headers": {"X-K": "a\0"}}}})
    assert (error.json_path, error.problem) == (
        f"{S}.headers.X-K",
        "header values must not contain a NUL character",
    )
    error = fail(tmp_path, {"state_dir": "/var/\0lib"})
    assert (error.json_path, error.problem) == ("$.state_dir", NUL_PROBLEM)


def test_lone_surrogate_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"servers": {"s": {"command": "a", "args": ["\\ud800"]}}}', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert (caught.value.json_path, caught.value.problem) == (
        f"{S}.args[0]",
        "contains a lone surrogate (an unpaired \\ud800-\\udfff escape), which cannot be encoded "
        "for the operating system; remove it",
    )


@pytest.mark.parametrize("command", ["check", "serve"])
def test_cli_refuses_a_nul_before_anything_starts(tmp_path: Path, command: str) -> None:
    (tmp_path / "token").write_bytes(b"abc\0def")
    healthy = {"command": [sys.executable, "-c", "pass"]}
    broken = {"command": [sys.executable, "-c", "pass"], "env": {"TOKEN": "${file:token}"}}
    config = write(tmp_path, {"servers": {"healthy": healthy, "broken": broken}})
    args = ["--state-dir", str(tmp_path / "state"), "--bind", "127.0.0.1:0"] if command == "serve" else []
    result = run_cli(command, "--config", str(config), *args)
    problem = assert_one_config_error(result, config, "$.servers.broken.env.TOKEN")
    assert problem == NUL_EXPANDED
    assert result.stdout == ""
    assert not (tmp_path / "state").exists()  # refused before the state directory is touched
