"""The ``gateway`` config section: defaults, bounds, and ``prefix: false`` only over
exactly one server (a plain proxy of one backend)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supervisor.settings.loader import ConfigError, load_config
from supervisor.settings.model import GatewaySettings


def _write(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_defaults_without_a_section(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, {"servers": {"a": {"command": "x"}}}))
    assert config.gateway == GatewaySettings()
    assert config.gateway.max_message_bytes == 4 * 1024 * 1024
    assert config.gateway.max_sessions_per_tenant == 256
    assert config.gateway.session_idle_s == 1800


def test_prefix_false_over_one_server(tmp_path: Path) -> None:
    doc = {"servers": {"a": {"command": "x"}}, "gateway": {"prefix": False, "max_message_bytes": 2048}}
    config = load_config(_write(tmp_path, doc))
    assert config.gateway.prefix is False and config.gateway.max_message_bytes == 2048


@pytest.mark.parametrize(
    ("gateway", "servers", "problem"),
    [
        ({"prefix": False}, 2, "$.gateway.prefix: false is accepted only with exactly one server"),
        ({"prefix": False}, 0, "$.gateway.prefix: false is accepted only with exactly one server"),
        ({"max_message_bytes": 10}, 1, "$.gateway.max_message_bytes"),
        ({"session_idle_s": 0}, 1, "$.gateway.session_idle_s"),
        ({"max_sessions_per_tenant": 0}, 1, "$.gateway.max_sessions_per_tenant"),
        ({"prefixx": True}, 1, "$.gateway"),
    ],
)
def test_bad_values_name_the_field(tmp_path: Path, gateway: object, servers: int, problem: str) -> None:
    doc = {"servers": {f"s{i}": {"command": "x"} for i in range(servers)}, "gateway": gateway}
    path = _write(tmp_path, doc)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"config error: {path}: {problem}")
