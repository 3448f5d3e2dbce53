"""Property tests: the loader fails only with ConfigError, and valid maps read back exactly."""

from __future__ import annotations

import json
import os
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.spec import Scope, Start
from supervisor.settings.loader import ConfigError, describe_config, load_config
from supervisor.settings.model import Config

SERVER_KEYS = [
    "type", "transport", "command", "args", "env", "cwd", "url", "headers", "oauth", "token",
    "server_name", "serverName", "enabled", "disabled", "trusted", "scope", "start",
    "init_timeout_ms", "call_timeout_ms", "timeout_ms", "max_call_ms", "max_output_bytes",
    "reconnect_schedule_s", "comand", "Type",
]  # fmt: skip

# Strings the loader gives meaning to, mixed into arbitrary text.
MEANINGFUL = [
    "${env:X}", "${env:UNSET}", "${file:x}", "${file:}", "$${", "${", "${X}", "local", "remote",
    "websocket", "stdio", "ws://h/b", "https://h/mcp", "http://[::1", "auto", "lazy", "session",
    "mcp:*", "allow", "127.0.0.1:1", "", "a\0b", "\0", "${file:nul}", "\ud800", "a\u202eb",
    "\u2028", "\x85", "\x1b[2J", "a/b", "..", "x" * 65, "https://u:p@h/mcp",
]  # fmt: skip

texts = st.text(max_size=12) | st.sampled_from(MEANINGFUL)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
numbers = (
    st.integers(-5, 10**7)
    | st.floats(allow_nan=False)
    | st.sampled_from([1e300, 3_600_001, 86_400_001, 604_800_001, 10**30])
)
string_maps = st.dictionaries(texts, texts, max_size=3)
# Mostly-plausible values per key, so examples get past the first type check.
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "type": st.sampled_from(["local", "remote", "websocket", "stdio", "http", "docker"]),
    "transport": st.sampled_from(["websocket", "stdio", "sse", "tcp"]),
    "command": st.lists(texts, max_size=3) | texts,
    "args": st.lists(texts, max_size=3),
    "env": string_maps,
    "headers": string_maps,
    "url": st.sampled_from(["https://h/mcp", "ws://h:1/b", "ftp://h", "http://h:99999", "h", "https://u:p@h/"]),
    "oauth": st.booleans() | string_maps,
    "scope": st.sampled_from(["shared", "session", "x"]),
    "start": st.sampled_from(["lazy", "eager", "x"]),
    "reconnect_schedule_s": st.lists(numbers, max_size=3),
    **{key: numbers for key in ("init_timeout_ms", "call_timeout_ms", "timeout_ms",
                                "max_call_ms", "max_output_bytes")},
    **{key: st.booleans() for key in ("enabled", "disabled", "trusted")},
}  # fmt: skip


def mostly(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``plausible`` nine times in ten, any JSON value otherwise."""
    return st.integers(0, 9).flatmap(lambda n: plausible if n else json_values)


@st.composite
def entries(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(SERVER_KEYS), max_size=6, unique=True))
    return {key: draw(mostly(PLAUSIBLE.get(key, texts))) for key in keys}


names = st.text(max_size=8) | st.sampled_from(["time", "github", "a b", "", "a/b", "..", "t\u202e", "x" * 65])
server_maps = st.dictionaries(names, mostly(entries()), max_size=3)
rules = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "permission": mostly(st.sampled_from(["mcp:*", "*", "github:*", "mcp:a:b"])),
            "pattern": mostly(texts),
            "action": mostly(st.sampled_from(["allow", "ask", "deny", "permit"])),
            "x": json_values,
        },
    ),
    max_size=3,
)
sections = {
    "tool_search": st.fixed_dictionaries(
        {},
        optional={
            "enabled": mostly(st.sampled_from(["auto", True, False, "yes"])),
            "threshold": mostly(st.integers(-1, 50)),
            "max_matches": mostly(st.integers(-1, 50)),
        },
    ),
    "trust": st.fixed_dictionaries(
        {},
        optional={
            "rules": mostly(rules),
            "max_description_length": mostly(numbers),
            "approval_timeout_s": mostly(numbers),
            "approval_timeout_ms": mostly(numbers),
        },
    ),
    "admin": st.fixed_dictionaries(
        {},
        optional={
            "bind": mostly(st.sampled_from(["127.0.0.1:0", "[::1]:8765", "h:99999", "h"])),
            "tokens": mostly(string_maps),
        },
    ),
    "state_dir": st.none() | texts,
}
server_sections = st.sampled_from(["servers", "mcpServers", "mcp"])


@st.composite
def documents(draw: st.DrawFn) -> object:
    """Arbitrary JSON, or an object with a server map and some other sections."""
    if draw(st.integers(0, 4)) == 0:
        return draw(json_values)
    doc: dict[str, Any] = {draw(server_sections): draw(mostly(server_maps))}
    for key in draw(st.lists(st.sampled_from(sorted(sections)), max_size=4, unique=True)):
        doc[key] = draw(mostly(sections[key]))
    if draw(st.integers(0, 9)) == 0:  # two server maps, a typo, or someone else's setting
        doc[draw(st.sampled_from(["servers", "mcp", "srvers", "inputs"]))] = {}
    return doc


environs = st.dictionaries(
    st.sampled_from(["X", "Y"]), st.text(max_size=6) | st.sampled_from(["\0", "v\0v"]), max_size=2
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("config")
    (directory / "x").write_text("token\n")
    (directory / "nul").write_bytes(b"to\0ken\n")
    return directory


def assert_the_os_can_take(config: Config) -> None:
    """Whatever a loaded config hands to the OS (argv, environment, paths) it can take."""
    strings = [config.state_dir or ""]
    for spec in config.servers:
        strings += [*spec.command, *spec.env, *spec.env.values(), spec.cwd or ""]
    for text in strings:
        assert "\0" not in text
        os.fsencode(text)


def assert_within_bounds(config: Config) -> None:
    """Names are short, visible and no paths; timeouts within 1 h / 24 h / 7 d."""
    for spec in config.servers:
        assert 0 < len(spec.name) <= 64 and spec.name.isprintable()
        assert "/" not in spec.name and "\\" not in spec.name and ".." not in spec.name
        assert spec.init_timeout_s <= 3600 and spec.call_timeout_s <= 86400
        assert spec.max_call_timeout_s <= 7 * 86400
    for warning in config.warnings:
        assert str(warning).startswith(f"config warning: {config.source}: $") and str(warning).isprintable()


def load_or_error(path: Path, environ: dict[str, str]) -> Config | ConfigError:
    """Anything but a Config or a ConfigError escapes and fails the test."""
    try:
        config = load_config(path, environ=environ)
    except ConfigError as error:
        assert str(error).startswith(f"config error: {path}: $")
        assert str(error).isprintable()  # one line, nothing that moves the terminal
        return error
    assert_the_os_can_take(config)
    assert_within_bounds(config)
    return config


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents(), environ=environs)
def test_any_json_document_loads_or_fails_with_config_error(
    workdir: Path, doc: object, environ: dict[str, str]
) -> None:
    path = workdir / "doc.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = load_or_error(path, environ)
    if isinstance(result, Config):
        assert all(line.isprintable() for line in describe_config(result))


@given(data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_load_or_fail_with_config_error(workdir: Path, data: bytes) -> None:
    path = workdir / "bytes.json"
    path.write_bytes(data)
    load_or_error(path, {})


# --- hostile strings in otherwise valid local servers --------------------------------------

# Pieces the OS or a reader would choke on, mixed with harmless text and references.
HOSTILE = ["a", "-x", " ", "/", "..", "\0", "\ud800", "\udc80", "\u202e", "\u2066", "\x1b[31m",
           "\n", "${env:X}", "${file:x}", "${file:nul}", "é"]  # fmt: skip
hostile = st.lists(st.sampled_from(HOSTILE), max_size=4).map("".join)


@st.composite
def hostile_local_servers(draw: st.DrawFn) -> dict[str, Any]:
    program = draw(hostile.filter(str.strip))
    entry: dict[str, Any] = {"command": [program, *draw(st.lists(hostile, max_size=2))]}
    if draw(st.booleans()):
        entry["args"] = draw(st.lists(hostile, max_size=2))
    if draw(st.booleans()):
        entry["env"] = draw(st.dictionaries(hostile, hostile, max_size=2))
    if draw(st.booleans()):
        entry["cwd"] = draw(hostile)
    return {draw(st.sampled_from(["servers", "mcpServers", "mcp"])): {"s": entry}}


@settings(max_examples=300)
@given(doc=hostile_local_servers(), environ=environs)
def test_strings_for_the_os_are_refused_or_safe(workdir: Path, doc: object, environ: dict[str, str]) -> None:
    path = workdir / "hostile.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    load_or_error(path, environ)


# --- valid documents read back exactly ---------------------------------------------------

names = st.text(string.ascii_letters + string.digits + "-_. ", min_size=1, max_size=10).filter(
    lambda name: bool(name.strip()) and ".." not in name
)
words = st.text(string.printable.replace("$", ""), max_size=8)
millis = st.integers(min_value=1, max_value=10**7)
secrets = st.text(string.ascii_letters + string.digits, min_size=6, max_size=12)


@st.composite
def server_entry(draw: st.DrawFn, secret: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A valid entry and the ServerSpec fields it must produce."""
    entry: dict[str, Any] = {}
    want: dict[str, Any] = {}
    if draw(st.booleans()):
        program = draw(words.filter(str.strip))
        args = draw(st.lists(words, max_size=3))
        if draw(st.booleans()):
            entry.update(command=program, args=[*args, "--key=${env:SECRET}"])
        else:
            entry["command"] = [program, *args, "--key=${env:SECRET}"]
        want.update(type="local", command=(program, *args, f"--key={secret}"))
    else:
        host = draw(st.sampled_from(["h", "example.org", "10.0.0.5:8765"]))
        scheme = draw(st.sampled_from(["http", "https", "ws", "wss"]))  # ws(s): a bridge
        entry.update(url=f"{scheme}://{host}/mcp", token="${env:SECRET}")
        kind = "websocket" if scheme.startswith("ws") else "remote"
        want.update(type=kind, url=f"{scheme}://{host}/mcp")
        want["headers"] = {"Authorization": f"Bearer {secret}"}
    call = draw(st.none() | millis)
    if call is not None:
        entry[draw(st.sampled_from(["call_timeout_ms", "timeout_ms"]))] = call
        want["call_timeout_s"] = call / 1000
    init = draw(st.none() | st.integers(min_value=1, max_value=3_600_000))
    if init is not None:
        entry["init_timeout_ms"] = init
        want["init_timeout_s"] = init / 1000
    for key, choices in (("scope", Scope), ("start", Start)):
        choice = draw(st.none() | st.sampled_from(list(choices)))
        if choice is not None:
            entry[key] = choice.value
            want[key] = choice
    for key in ("trusted", "enabled"):
        flag = draw(st.none() | st.booleans())
        if flag is not None:
            entry[key] = want[key] = flag
    schedule = draw(st.none() | st.lists(st.integers(0, 600), min_size=1, max_size=6))
    if schedule is not None:
        entry["reconnect_schedule_s"] = schedule
        want["reconnect_schedule_s"] = tuple(float(delay) for delay in schedule)
    return entry, want


@st.composite
def server_maps_with_expectations(
    draw: st.DrawFn,
) -> tuple[str, str, dict[str, Any], list[dict[str, Any]]]:
    secret = draw(secrets)
    chosen = draw(st.lists(names, min_size=0, max_size=6, unique=True))
    servers: dict[str, Any] = {}
    wants = []
    for name in chosen:
        entry, want = draw(server_entry(secret))
        servers[name] = entry
        wants.append({"name": name, **want})
    return draw(st.sampled_from(["servers", "mcpServers", "mcp"])), secret, servers, wants


@settings(max_examples=200)
@given(case=server_maps_with_expectations())
def test_valid_server_maps_read_back(
    workdir: Path, case: tuple[str, str, dict[str, Any], list[dict[str, Any]]]
) -> None:
    dialect, secret, servers, wants = case
    path = workdir / "valid.json"
    path.write_text(json.dumps({dialect: servers}), encoding="utf-8")
    config = load_config(path, environ={"SECRET": secret})
    assert [spec.name for spec in config.servers] == [want["name"] for want in wants]
    for spec, want in zip(config.servers, wants, strict=True):
        for field, value in want.items():
            assert getattr(spec, field) == value, field
        assert isinstance(spec.command, tuple)
        assert all(isinstance(item, str) for item in spec.command)
        assert spec.max_call_timeout_s == 10 * spec.call_timeout_s
        assert secret in spec.secrets
        assert secret not in repr(spec)
    assert secret not in "\n".join(describe_config(config))
