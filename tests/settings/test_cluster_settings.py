"""The ``cluster`` section: what it needs, and every bad value named with its fix."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from supervisor.cluster.replica import identity_for
from supervisor.settings.loader import ConfigError, load_config

KEY = base64.b64encode(b"k" * 32).decode()
STORE = {"url": "postgresql://mcp:pw@127.0.0.1:5432/mcp"}


def load(tmp_path: Path, doc: dict[str, Any]) -> Any:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"servers": {}, **doc}))
    return load_config(path)


def test_a_cluster_section_is_read_with_its_defaults(tmp_path: Path) -> None:
    config = load(tmp_path, {"store": STORE, "cluster": {"replica": "r1", "keys": [KEY]}})
    cluster = config.cluster
    assert (cluster.replica, cluster.keys, cluster.address) == ("r1", (b"k" * 32,), None)
    assert (cluster.heartbeat_s, cluster.ttl_s, cluster.drain_s) == (0.25, 1.0, 30.0)
    assert KEY in config.secrets  # redacted wherever it might show
    assert "kkkk" not in repr(cluster)
    identity = identity_for(config)
    assert identity is not None and identity.id == "r1" and identity.incarnation.startswith("r1:")
    assert identity_for(config).incarnation != identity.incarnation  # type: ignore[union-attr]


def test_without_a_shared_store_there_is_no_replica(tmp_path: Path) -> None:
    assert identity_for(load(tmp_path, {})) is None
    shared = identity_for(load(tmp_path, {"store": STORE}))
    assert shared is not None and shared.cluster is None and shared.id


@pytest.mark.parametrize(
    ("cluster", "store", "words"),
    [
        ({"replica": "r1", "keys": [KEY]}, None, "set store.url"),
        ({"keys": [KEY]}, STORE, "'replica' is missing"),
        ({"replica": "r1"}, STORE, "'keys' is missing"),
        ({"replica": "r 1", "keys": [KEY]}, STORE, "not a replica id"),
        ({"replica": "r1", "keys": []}, STORE, "the list is empty"),
        ({"replica": "r1", "keys": ["c2hvcnQ="]}, STORE, "not a key: it is 5 bytes"),
        ({"replica": "r1", "keys": [KEY], "address": "10.0.0.5:8080"}, STORE, "not a base URL"),
        ({"replica": "r1", "keys": [KEY], "ttl_s": 0.4}, STORE, "at least two heartbeats"),
        ({"replica": "r1", "keys": [KEY], "ttl_s": 30}, STORE, "at most 10 s"),
        ({"replica": "r1", "keys": [KEY], "heartbeat": 1}, STORE, "heartbeat_s"),
    ],
)
def test_a_bad_cluster_section_names_the_problem(
    tmp_path: Path, cluster: dict[str, Any], store: dict[str, Any] | None, words: str
) -> None:
    doc: dict[str, Any] = {"cluster": cluster}
    if store is not None:
        doc["store"] = store
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, doc)
    assert "$.cluster" in str(caught.value) and words in str(caught.value)
    assert KEY not in str(caught.value)
