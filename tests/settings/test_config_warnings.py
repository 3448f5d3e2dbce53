"""Config warnings about the top level and the server names: other hosts' settings pass
in silence, anything else unknown is named (``top_level.py``), and so are two servers
whose tool ids cannot be told apart well (``server_warnings.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from supervisor.settings.top_level import HOST_KEYS, OUR_KEYS
from tests.settings.test_config_loader import fail, load

KNOWN = (
    "the known keys are admin, audit, bridge, cluster, console, exposure, gateway, limits, mcp, mcpServers, "
    "secrets_at_rest, servers, signin, state_dir, store, tool_search, tracing, trust"
)
ENTRY = {
    "servers": {"command": "a"},
    "mcpServers": {"command": "a"},
    "mcp": {"type": "local", "command": ["a"]},
}
"""A server entry in each dialect."""


def warnings_of(tmp_path: Path, doc: object) -> list[str]:
    return [str(warning) for warning in load(tmp_path, doc).warnings]


def ignored(tmp_path: Path, key: str, hint: str = KNOWN) -> str:
    return (
        f"config warning: {tmp_path / 'config.json'}: $.{key}: unknown key {key!r}, ignored: it is no "
        f"setting of this version of mcp-supervisor ({hint}); correct its name, or remove it"
    )


@pytest.mark.parametrize("section", sorted(HOST_KEYS))
def test_the_settings_of_the_host_whose_file_it_is_pass_in_silence(tmp_path: Path, section: str) -> None:
    doc: dict[str, Any] = {section: {"a": ENTRY[section]}, "$schema": "https://example.invalid/schema.json"}
    doc.update({key: {} for key in HOST_KEYS[section]})
    config = load(tmp_path, doc)
    assert config.warnings == () and len(config.servers) == 1


def test_claude_desktop_vs_code_and_opencode_files_load_without_a_word(tmp_path: Path) -> None:
    desktop = {
        "mcpServers": {"a": {"command": "a"}},
        "globalShortcut": "Ctrl+Q",
        "isUsingBuiltInNodeForMcp": False,
    }
    vs_code = {
        "inputs": [{"type": "promptString", "id": "key", "password": True}],
        "servers": {"a": ENTRY["servers"]},
    }
    opencode = {"$schema": "https://opencode.ai/config.json", "model": "m", "server": {"port": 1}, "mcp": {}}
    for doc in (desktop, vs_code, opencode):
        assert warnings_of(tmp_path, doc) == []


def test_an_unknown_key_is_named_with_the_known_ones(tmp_path: Path) -> None:
    doc = {"servers": {}, "telemetry": {"enabled": False}, "futureSetting": 1}
    assert warnings_of(tmp_path, doc) == [ignored(tmp_path, "telemetry"), ignored(tmp_path, "futureSetting")]
    assert load(tmp_path, doc).servers == ()  # the config is used all the same


def test_another_hosts_setting_is_unknown_in_a_file_of_another_dialect(tmp_path: Path) -> None:
    """``inputs`` is VS Code's, next to ``servers``; next to ``mcpServers`` it is nobody's."""
    assert warnings_of(tmp_path, {"mcpServers": {}, "inputs": []}) == [ignored(tmp_path, "inputs")]
    assert warnings_of(tmp_path, {"servers": {}, "inputs": []}) == []


def test_a_near_miss_of_a_hosts_setting_names_it(tmp_path: Path) -> None:
    doc = {"mcpServers": {}, "globalShortcuts": "Ctrl+Q"}
    hint = "the nearest known key is 'globalShortcut'"
    assert warnings_of(tmp_path, doc) == [ignored(tmp_path, "globalShortcuts", hint)]


@pytest.mark.parametrize(
    ("key", "meant"), [("tool_serach", "tool_search"), ("Trust", "trust"), ("server", "servers")]
)
def test_a_near_miss_of_one_of_ours_stays_an_error(tmp_path: Path, key: str, meant: str) -> None:
    """A typo of ours would drop the setting: an error, not a warning (also where a host
    knows the key: opencode's ``server`` is its own only next to ``mcp``)."""
    error = fail(tmp_path, {"mcpServers": {}, key: {}})
    assert (error.json_path, error.problem) == ("$", f"unknown key {key!r} (did you mean {meant!r}?)")


def test_an_unknown_key_is_shown_visibly(tmp_path: Path) -> None:
    (warning,) = load(tmp_path, {"servers": {}, "odd\u202ekey": 1}).warnings
    assert warning.json_path == '$["odd\\u202ekey"]'
    assert "'odd\\u202ekey'" in warning.problem and str(warning).isprintable()


def test_our_keys_are_the_sections_the_loader_reads(tmp_path: Path) -> None:
    assert set(OUR_KEYS) == {"servers", "mcpServers", "mcp", "tool_search", "trust", "admin", "gateway",
                             "bridge", "tracing", "exposure", "limits", "state_dir",
                             "secrets_at_rest", "audit", "signin", "store", "cluster", "console"}  # fmt: skip
    for key in ("tool_search", "trust", "admin", "gateway", "bridge", "tracing", "secrets_at_rest", "audit"):
        assert warnings_of(tmp_path, {key: {}}) == []
    for key in ("exposure", "limits"):
        assert warnings_of(tmp_path, {key: []}) == []


# --- server names -------------------------------------------------------------------------


@pytest.mark.parametrize("section", sorted(ENTRY))
def test_two_servers_that_differ_only_in_case_are_named_as_a_pair(tmp_path: Path, section: str) -> None:
    doc = {section: {"time": ENTRY[section], "other": ENTRY[section], "Time": ENTRY[section]}}
    config = load(tmp_path, doc)
    assert [(w.json_path, w.problem) for w in config.warnings] == [
        (
            f"$.{section}.Time",
            "server 'Time' and server 'time' give tool ids that differ only in letter case "
            "(Time_<tool>, time_<tool>), easily confused by people and models; rename one of them",
        )
    ]
    assert [spec.name for spec in config.servers] == ["time", "other", "Time"]


def test_two_servers_whose_tool_ids_collide_are_named_as_a_pair(tmp_path: Path) -> None:
    doc = {
        "servers": {
            "my-server": ENTRY["servers"],
            "my_server": ENTRY["servers"],
            "my server": ENTRY["servers"],
        }
    }
    problems = [(w.json_path, w.problem) for w in load(tmp_path, doc).warnings]
    collide = (
        "give the same tool ids (my_server_<tool>), so the tools of both get hashed ids "
        "(my_server_<tool>_<hash>) instead; rename one of them"
    )
    assert problems == [
        ("$.servers.my_server", f"server 'my_server' and server 'my-server' {collide}"),
        ('$.servers["my server"]', f"server 'my server' and server 'my-server' {collide}"),
    ]


def test_names_that_tool_ids_tell_apart_give_no_warning(tmp_path: Path) -> None:
    doc = {"servers": {"time": ENTRY["servers"], "time2": ENTRY["servers"], "timer": ENTRY["servers"]}}
    assert warnings_of(tmp_path, doc) == []
