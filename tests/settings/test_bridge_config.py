"""The bridge's config: ``bridge: true`` on a server, the ``bridge`` section, defaults,
and a located ``config error`` for each thing that can be wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.runtime.reload_plan import plan_reload
from supervisor.settings.model import BridgeSettings
from tests.settings.test_config_loader import fail, load

LOCAL = {"command": "mini-server"}
ORIGINS = "$.bridge.allowed_origins"


def test_defaults_export_nothing_and_follow_the_gateway_bound(tmp_path: Path) -> None:
    config = load(tmp_path, {"servers": {"a": LOCAL}})
    assert config.bridge == BridgeSettings()
    assert config.bridge.allowed_origins == () and config.bridge.max_message_bytes is None
    assert not config.servers[0].bridge


def test_a_full_section_and_an_exported_server(tmp_path: Path) -> None:
    doc = {
        "servers": {"a": {**LOCAL, "bridge": True}, "b": LOCAL},
        "bridge": {
            "allowed_origins": ["https://App.Example", "http://localhost:5173", "http://[::1]:8080"],
            "max_sessions_per_tenant": 4,
            "max_processes": 10,
            "heartbeat_s": 5,
            "idle_s": 60.5,
            "max_message_bytes": 65536,
        },
    }
    config = load(tmp_path, doc)
    assert [spec.bridge for spec in config.servers] == [True, False]
    assert config.bridge == BridgeSettings(
        allowed_origins=("https://app.example", "http://localhost:5173", "http://[::1]:8080"),
        max_sessions_per_tenant=4,
        max_processes=10,
        heartbeat_s=5.0,
        idle_s=60.5,
        max_message_bytes=65536,
    )


@pytest.mark.parametrize(
    ("doc", "path", "fragment"),
    [
        ({"servers": {"a": {**LOCAL, "bridge": "yes"}}}, "$.servers.a.bridge", "expected true or false"),
        (
            {"servers": {"r": {"url": "https://example.com/mcp", "bridge": True}}},
            "$.servers.r.bridge",
            "only local (stdio) servers can be exported",
        ),
        (
            {"mcpServers": {"r": {"url": "https://example.com/mcp", "bridge": True}}},
            "$.mcpServers.r.bridge",
            "this one is remote",
        ),
        ({"bridge": {"allowed_origin": []}}, "$.bridge", "allowed_origins"),
        ({"bridge": {"allowed_origins": "https://a.example"}}, ORIGINS, "a list of origins"),
        ({"bridge": {"allowed_origins": ["*"]}}, "$.bridge.allowed_origins[0]", "no '*'"),
        ({"bridge": {"allowed_origins": ["https://a.example/app"]}}, f"{ORIGINS}[0]", "no path"),
        ({"bridge": {"allowed_origins": [3]}}, "$.bridge.allowed_origins[0]", "got 3"),
        ({"bridge": {"max_sessions_per_tenant": 0}}, "$.bridge.max_sessions_per_tenant", "at least 1"),
        ({"bridge": {"max_processes": 1.5}}, "$.bridge.max_processes", "whole number"),
        ({"bridge": {"heartbeat_s": 0}}, "$.bridge.heartbeat_s", "greater than 0"),
        ({"bridge": {"idle_s": "long"}}, "$.bridge.idle_s", "expected a number"),
        ({"bridge": {"max_message_bytes": 10}}, "$.bridge.max_message_bytes", "at least 1024"),
        ({"bridge": []}, "$.bridge", "expected"),
    ],
)
def test_each_mistake_is_a_located_config_error(
    tmp_path: Path, doc: dict[str, object], path: str, fragment: str
) -> None:
    error = fail(tmp_path, doc)
    assert error.json_path == path, error
    assert fragment in error.problem, error


def test_a_reload_applies_bridge_changes_live(tmp_path: Path) -> None:
    old = load(tmp_path, {"servers": {"a": LOCAL}})
    new = load(tmp_path, {"servers": {"a": {**LOCAL, "bridge": True}}, "bridge": {"max_processes": 3}})
    plan = plan_reload(old, new)
    assert not plan.restart and [spec.name for spec in plan.retune] == ["a"]
    assert "bridge" in plan.settings
    assert [(c.name, c.keys) for c in plan.changes] == [("a", ("bridge",))]
