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

from actors.log_events import event_name
from supervisor.settings.expansion import MAX_FILE_BYTES
from supervisor.settings.loader import ConfigError, describe_config, load_config

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
    assert problem == (f"${{file:{target}}} is {kind}, not a regular file ({target}); point it at a file")


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
        f"${{file:secrets}} is a directory, not a regular file ({tmp_path / 'secrets'}); point it at a file",
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
    "contains a NUL character, which no program argument, environment variable or path can hold; remove it"
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


# --- names, timeouts, env names, URL credentials: the same rules in every dialect ----------

DIALECTS = ["servers", "mcpServers", "mcp"]


def in_dialect(dialect: str, name: str, entry: dict[str, Any]) -> dict[str, Any]:
    if dialect == "mcp" and "command" in entry:  # connectors write type + command as a list
        entry = {"type": "local", **entry}
    return {dialect: {name: entry}}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    ("name", "json_name", "problem"),
    [
        ("a/b", '["a/b"]', "server names must not contain '/': the name is used in URLs and file names; "
         "rename the server"),
        ("..", '[".."]', "server names must not contain '..': the name is used in URLs and file "
         "names; rename the server"),
        ("a..b", '["a..b"]', "server names must not contain '..': the name is used in URLs and file "
         "names; rename the server"),
        ("a\\b", '["a\\\\b"]', "server names must not contain '\\\\': the name is used in URLs and "
         "file names; rename the server"),
        ("time\u202eevil", '["time\\u202eevil"]', "server names must not contain control, bidi or "
         "invisible characters (found U+202E); rename the server"),
        ("a\u200bb", '["a\\u200bb"]', "server names must not contain control, bidi or invisible "
         "characters (found U+200B); rename the server"),
        ("a\x1b[31mb", '["a\\u001b[31mb"]', "server names must not contain control, bidi or "
         "invisible characters (found U+001B); rename the server"),
        ("l\u2028ine", '["l\\u2028ine"]', "server names must not contain control, bidi or "
         "invisible characters (found U+2028); rename the server"),
        ("x" * 65, "." + "x" * 65, "server names are at most 64 characters, this one has 65; "
         "shorten it"),
    ],
)  # fmt: skip
def test_unsafe_server_names_are_refused(
    tmp_path: Path, dialect: str, name: str, json_name: str, problem: str
) -> None:
    path = write(tmp_path, in_dialect(dialect, name, {"command": ["a"]}))
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    line = str(caught.value)
    assert line == f"config error: {path}: $.{dialect}{json_name}: {problem}"
    assert line.isprintable() and len(line.splitlines()) == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_names_up_to_64_visible_characters_are_fine(tmp_path: Path, dialect: str) -> None:
    names = ["x" * 64, "my server", "время", "a.b-c_d", "日本語"]
    doc = {dialect: {name: in_dialect(dialect, name, {"command": ["a"]})[dialect][name] for name in names}}
    config = load_config(write(tmp_path, doc), environ={})
    assert [spec.name for spec in config.servers] == names


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("init_timeout_ms", 1e300, "expected at most 3600000 (1 hour), got 1e+300"),
        ("init_timeout_ms", 3_600_001, "expected at most 3600000 (1 hour), got 3600001"),
        ("call_timeout_ms", 1e300, "expected at most 86400000 (24 hours), got 1e+300"),
        ("call_timeout_ms", 86_400_001, "expected at most 86400000 (24 hours), got 86400001"),
        ("timeout_ms", 86_400_001, "expected at most 86400000 (24 hours), got 86400001"),
        ("max_call_ms", 1e300, "expected at most 604800000 (7 days), got 1e+300"),
        ("max_call_ms", 604_800_001, "expected at most 604800000 (7 days), got 604800001"),
    ],
)
def test_timeouts_are_bounded(tmp_path: Path, dialect: str, key: str, value: float, problem: str) -> None:
    error = fail(tmp_path, in_dialect(dialect, "s", {"command": ["a"], key: value}))
    assert (error.json_path, error.problem) == (f"$.{dialect}.s.{key}", problem)


def test_timeouts_at_their_bounds_are_fine_and_the_default_cap_stays_within_7_days(tmp_path: Path) -> None:
    entry = {"command": ["a"], "init_timeout_ms": 3_600_000, "call_timeout_ms": 86_400_000}
    (spec,) = load_config(write(tmp_path, {"servers": {"s": entry}}), environ={}).servers
    assert (spec.init_timeout_s, spec.call_timeout_s) == (3600, 86400)
    assert spec.max_call_timeout_s == 7 * 86400  # not ten call timeouts (10 days)
    entry = {"command": ["a"], "call_timeout_ms": 60_000, "max_call_ms": 604_800_000}
    (spec,) = load_config(write(tmp_path, {"servers": {"s": entry}}), environ={}).servers
    assert spec.max_call_timeout_s == 7 * 86400
    (spec,) = load_config(write(tmp_path, {"servers": {"s": {"command": ["a"]}}}), environ={}).servers
    assert spec.max_call_timeout_s == 300  # the default is untouched


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", ["${env:NAME}", "PREFIX_${file:x}"])
def test_references_in_env_names_are_refused(tmp_path: Path, dialect: str, name: str) -> None:
    error = fail(tmp_path, in_dialect(dialect, "s", {"command": ["a"], "env": {name: "v"}}), {"NAME": "K"})
    assert error.json_path == f"$.{dialect}.s.env[{json.dumps(name)}]"
    assert error.problem == (
        f"{name!r}: references are expanded in values, not in environment variable names; "
        "write the name itself"
    )


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    "url", ["https://alice:pw-planted@h/mcp", "https://alice@h/mcp", "http://a:b@h/v1/mcp"]
)
def test_credentials_in_a_url_are_a_warning(tmp_path: Path, dialect: str, url: str) -> None:
    entry: dict[str, Any] = {"url": url}
    if dialect == "mcp":
        entry["type"] = "remote"
    doc = {dialect: {"docs": entry, "time": {"url": "https://h/"}}}
    config = load_config(write(tmp_path, doc), environ={})
    assert [str(warning) for warning in config.warnings] == [
        f"config warning: {tmp_path / 'config.json'}: $.{dialect}.docs.url: the URL carries credentials "
        "(user:password@); URLs are shown and logged in many places, so move them to 'headers' "
        "(e.g. Authorization) or 'token'"
    ]
    assert len(config.servers) == 2


def test_check_prints_the_warning_on_stderr_and_still_succeeds(tmp_path: Path) -> None:
    config = write(tmp_path, {"servers": {"docs": {"url": "https://alice:pw-planted@h/mcp"}}})
    result = run_cli("check", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"config warning: {config}: $.servers.docs.url: the URL carries credentials (user:password@); "
        "URLs are shown and logged in many places, so move them to 'headers' (e.g. Authorization) "
        "or 'token'"
    ]
    assert result.stdout.startswith(f"config ok: {config}\n")
    assert "pw-planted" not in result.stdout + result.stderr


def test_auth_login_prints_the_warning_before_it_starts(tmp_path: Path) -> None:
    # Port 1 on loopback refuses at once: the login fails after the warning was shown.
    entry = {"url": "https://alice:pw-planted@127.0.0.1:1/mcp", "oauth": {}, "init_timeout_ms": 2000}
    config = write(tmp_path, {"servers": {"docs": entry}})
    result = run_cli("auth", "login", "docs", "--config", str(config), "--state-dir", str(tmp_path / "s"))
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"config warning: {config}: $.servers.docs.url: the URL carries credentials")
    assert "pw-planted" not in result.stdout + result.stderr


async def test_supervisor_open_logs_the_warnings(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from supervisor.service import Supervisor
    from supervisor.settings.model import Config, ConfigWarning

    warning = ConfigWarning("c.json", "$.servers.docs.url", "the URL carries credentials")
    async with Supervisor.open(Config(warnings=(warning,)), state_dir=tmp_path / "state"):
        pass
    (record,) = [r for r in caplog.records if event_name(r) == "config warning"]
    assert record.levelname == "WARNING"
    assert record.fields == {  # type: ignore[attr-defined]
        "file": "c.json", "path": "$.servers.docs.url", "problem": "the URL carries credentials"
    }  # fmt: skip


def test_error_and_check_lines_escape_invisible_characters(tmp_path: Path) -> None:
    error = fail(tmp_path, {"servers": {"s": {"command": "a", "scope": "x\u2028\u202ey"}}})
    assert error.problem == "expected 'shared' or 'session', got \"x\\u2028\\u202ey\""
    assert str(error).isprintable()
    config = load_config(write(tmp_path, {"servers": {"s": {"command": ["a", "\u202egnp.exe"]}}}), environ={})
    (line,) = describe_config(config)
    assert line.startswith("s [local] a '\\u202egnp.exe' (")
