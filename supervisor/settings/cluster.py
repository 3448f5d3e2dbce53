"""The ``cluster`` section: this process as one replica behind a load balancer.

``{"replica": "${env:MCP_REPLICA}", "keys": ["${file:cluster.key}"], "address":
"http://10.0.0.5:8080"}``. Replicas share the store (``store.url``), so the section
needs it. ``keys`` are 32 random bytes in base64 each, the same on every replica; the
first signs, each one is accepted, so a rotation lists the new key first and drops the
old one once every replica has the new list. Errors name the entry, never a key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from .expansion import Expander
from .model import ClusterSettings, StoreSettings
from .secrets_at_rest import MAKE_KEY, read_keys
from .values import Invalid, check_keys, child, expect_number, expect_object

_KEYS = ("replica", "keys", "address", "heartbeat_s", "ttl_s", "drain_s", "drain_notice_s")
REPLICA_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
"""A replica id: the prefix of its session ids, so a load balancer's pattern matches it."""
MAX_TTL_S = 10.0
EXAMPLE = '{"replica": "${env:MCP_REPLICA}", "keys": ["${file:cluster.key}"]}'


def read_cluster(value: object, path: str, exp: Expander, store: StoreSettings) -> ClusterSettings | None:
    """The cluster settings at ``path`` (None: a single process, the default)."""
    if value is None:
        return None
    obj = expect_object(value, path, f"an object like {EXAMPLE}")
    check_keys(obj, path, _KEYS)
    if store.url is None:
        raise Invalid(
            path,
            "replicas share their sessions, approvals and audit through the store: set store.url "
            "to a PostgreSQL database every replica uses, or remove 'cluster' to run one process",
        )
    for key in ("replica", "keys"):
        if key not in obj:
            raise Invalid(path, f"{key!r} is missing; a cluster section looks like {EXAMPLE}")
    at = child(path, "replica")
    replica = exp.text(obj["replica"], at, 'a replica id, like "r1"')
    if REPLICA_ID.fullmatch(replica) is None:
        raise Invalid(
            at,
            f"{replica!r} is not a replica id: 1 to 32 letters, digits, '-' or '_', starting with "
            "a letter or digit (it prefixes the session ids the load balancer routes on)",
        )
    defaults = ClusterSettings(replica, ())
    heartbeat = _number(obj, path, "heartbeat_s", defaults.heartbeat_s)
    ttl = _number(obj, path, "ttl_s", defaults.ttl_s)
    if ttl > MAX_TTL_S or heartbeat * 2 > ttl:
        raise Invalid(
            child(path, "ttl_s"),
            f"{ttl:g} s with a heartbeat every {heartbeat:g} s: the TTL must be at most "
            f"{MAX_TTL_S:g} s and at least two heartbeats, or a live replica's sessions are taken "
            "over (the defaults are heartbeat_s 0.25 and ttl_s 1)",
        )
    return ClusterSettings(
        replica=replica,
        keys=_keys(obj["keys"], child(path, "keys"), exp),
        address=_address(obj.get("address"), child(path, "address"), exp),
        heartbeat_s=heartbeat,
        ttl_s=ttl,
        drain_s=_number(obj, path, "drain_s", defaults.drain_s),
        drain_notice_s=_number(obj, path, "drain_notice_s", defaults.drain_notice_s),
    )


def _number(obj: Mapping[str, Any], path: str, key: str, default: float) -> float:
    return expect_number(obj.get(key, default), child(path, key), positive=True)


def _keys(value: object, path: str, exp: Expander) -> tuple[bytes, ...]:
    empty = f"the list is empty; every replica needs the same key, made with: {MAKE_KEY}"
    return read_keys(value, path, exp, "cluster.key", empty)


def _address(value: object, path: str, exp: Expander) -> str | None:
    if value is None:
        return None
    text = exp.text(value, path, 'a base URL, like "http://10.0.0.5:8080"')
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        port, parts = None, urlsplit("")
    usable = parts.scheme in ("http", "https") and parts.hostname and port is not None
    if not usable or parts.path not in ("", "/"):
        raise Invalid(
            path,
            f'{text!r} is not a base URL with a port: write it like "http://10.0.0.5:8080" (where '
            "the other replicas reach this one), or remove it to use the address it is bound to",
        )
    return text.rstrip("/")
