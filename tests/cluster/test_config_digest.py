"""The config digest replicas compare: one file read through two environments gives
one digest; anything shared that differs gives another; a reload cannot change the
cluster or the store."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from supervisor.cluster.digest import config_digest
from supervisor.runtime.reload_plan import ReloadRefused, plan_reload
from supervisor.settings.loader import load_config
from supervisor.settings.model import Config

KEY, OTHER_KEY = (base64.b64encode(k * 32).decode() for k in (b"k", b"o"))
DOC: dict[str, Any] = {
    "servers": {"time": {"command": ["uvx", "mcp-server-time"]}},
    "store": {"url": "postgresql://mcp:pw@127.0.0.1:5432/mcp"},
    "cluster": {"replica": "${env:MCP_REPLICA}", "keys": [KEY], "address": "${env:MCP_ADDRESS}"},
}


def load(
    folder: Path, doc: dict[str, Any], replica: str = "r1", address: str = "http://10.0.0.1:8080"
) -> Config:
    folder.mkdir(exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps(doc))
    return load_config(path, environ={"MCP_REPLICA": replica, "MCP_ADDRESS": address})


def test_one_file_through_two_environments_has_one_digest(tmp_path: Path) -> None:
    one = load(tmp_path / "a", DOC)
    two = load(tmp_path / "b", DOC, replica="r2", address="http://10.0.0.2:8080")
    assert one.cluster is not None and two.cluster is not None
    assert one.cluster.replica != two.cluster.replica and one.source != two.source
    assert config_digest(one) == config_digest(two)
    assert len(config_digest(one)) == 16 and config_digest(one) == config_digest(load(tmp_path / "a", DOC))


@pytest.mark.parametrize(
    "change",
    [
        {"servers": {"time": {"command": ["uvx", "mcp-server-time", "--local-timezone=UTC"]}}},
        {"trust": {"approval_timeout_s": 5}},
        {"cluster": {**DOC["cluster"], "keys": [OTHER_KEY]}},
        {"cluster": {**DOC["cluster"], "ttl_s": 2}},
    ],
    ids=["a server", "trust", "the shared keys", "the ttl"],
)
def test_a_shared_setting_that_differs_changes_the_digest(tmp_path: Path, change: dict[str, Any]) -> None:
    assert config_digest(load(tmp_path / "a", DOC)) != config_digest(load(tmp_path / "b", {**DOC, **change}))


def test_the_digest_of_a_shared_store_without_a_cluster_section(tmp_path: Path) -> None:
    doc = {key: value for key, value in DOC.items() if key != "cluster"}
    assert config_digest(load(tmp_path / "a", doc)) == config_digest(load(tmp_path / "b", doc))
    assert config_digest(load(tmp_path / "a", doc)) != config_digest(load(tmp_path / "a", DOC))


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"cluster": {**DOC["cluster"], "keys": [OTHER_KEY, KEY]}}, "changed (keys)"),
        ({"cluster": {**DOC["cluster"], "heartbeat_s": 0.1, "ttl_s": 2}}, "changed (heartbeat_s, ttl_s)"),
        ({"cluster": None}, "changed (removed)"),
    ],
    ids=["keys", "heartbeat", "removed"],
)
def test_a_reload_that_changes_the_cluster_is_refused_naming_what(
    tmp_path: Path, change: dict[str, Any], named: str
) -> None:
    running = load(tmp_path / "a", DOC)
    new = load(tmp_path / "a", {key: value for key, value in {**DOC, **change}.items() if value is not None})
    with pytest.raises(ReloadRefused) as refused:
        plan_reload(running, new)
    assert refused.value.key == "$.cluster" and named in str(refused.value)
    assert "a restart of mcp-supervisor is needed" in str(refused.value)
    assert KEY not in str(refused.value) and OTHER_KEY not in str(refused.value)
    # another replica's id is no change to this one's running config
    assert plan_reload(running, load(tmp_path / "a", DOC)).summary() is not None
