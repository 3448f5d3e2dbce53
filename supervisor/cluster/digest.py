"""The config digest a replica publishes in its heartbeat row (pure).

Replicas behind one load balancer must run one config: a session moved to another
replica, or a request forwarded to it, must meet the same servers, trust rules and
tokens. Each replica publishes a digest of what it loaded, leaving out what is its own
(``cluster.replica``, ``cluster.address``), where the file was read from and the
warnings about it, so replicas that read one file through different environments
match. With shared keys the digest is an HMAC under a key derived from the first one,
so it says nothing about the config's secrets to someone without the keys.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import attrs

from supervisor.settings.model import Config

DIGEST_CHARS = 16


def config_digest(config: Config) -> str:
    """The digest of ``config`` (16 hex digits) without its per-replica values."""
    mine = attrs.evolve(config, source=None, warnings=())
    if config.cluster is not None:
        mine = attrs.evolve(mine, cluster=attrs.evolve(config.cluster, replica="", address=None))
    text = json.dumps(_plain(mine), sort_keys=True, separators=(",", ":"), default=repr).encode()
    if config.cluster is not None and config.cluster.keys:
        key = hmac.new(config.cluster.keys[0], b"config digest", hashlib.sha256).digest()
        return hmac.new(key, text, hashlib.sha256).hexdigest()[:DIGEST_CHARS]
    return hashlib.sha256(text).hexdigest()[:DIGEST_CHARS]


def _plain(value: Any) -> Any:
    """``value`` as JSON-able data, the same for equal settings."""
    if attrs.has(type(value)):
        return {f.name: _plain(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((_plain(item) for item in value), key=repr)
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, PurePath):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)
