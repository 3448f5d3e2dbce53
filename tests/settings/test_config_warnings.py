"""Config warnings about the server names: two servers whose tool ids cannot be told
apart well are named as a pair (``server_warnings.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.settings.test_config_loader import load

ENTRY = {
    "servers": {"command": "a"},
    "mcpServers": {"command": "a"},
    "mcp": {"type": "local", "command": ["a"]},
}
"""A server entry in each dialect."""


def warnings_of(tmp_path: Path, doc: object) -> list[str]:
    return [str(warning) for warning in load(tmp_path, doc).warnings]


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
