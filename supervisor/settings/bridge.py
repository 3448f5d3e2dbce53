"""The ``bridge`` section of a config file (``BridgeSettings``), and the servers' ``bridge: true``.

Only local (stdio) servers can be exported: the hub starts a process of the server's
own per client session and passes its lines through untouched.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.spec import ServerSpec

from .model import BridgeSettings
from .origins import read_origins
from .values import Invalid, check_keys, child, expect_int, expect_number, expect_object

_KEYS: tuple[str, ...] = ("allowed_origins", "max_sessions_per_tenant", "max_processes", "heartbeat_s")
_KEYS += ("idle_s", "max_message_bytes")


def read_bridge(value: object, path: str, servers: Sequence[ServerSpec], servers_path: str) -> BridgeSettings:
    """The bridge settings at ``path``; a non-local server with ``bridge: true`` is refused."""
    for spec in servers:
        if spec.bridge and spec.type != "local":
            raise Invalid(
                child(child(servers_path, spec.name), "bridge"),
                f"only local (stdio) servers can be exported through the bridge; this one is "
                f"{spec.type}: remove 'bridge' (clients can reach it through /mcp)",
            )
    obj = expect_object(value, path)
    check_keys(obj, path, _KEYS)
    defaults = BridgeSettings()
    max_bytes = obj.get("max_message_bytes")
    return BridgeSettings(
        allowed_origins=read_origins(obj.get("allowed_origins", []), child(path, "allowed_origins")),
        max_sessions_per_tenant=expect_int(
            obj.get("max_sessions_per_tenant", defaults.max_sessions_per_tenant),
            child(path, "max_sessions_per_tenant"),
            minimum=1,
        ),
        max_processes=expect_int(
            obj.get("max_processes", defaults.max_processes), child(path, "max_processes"), minimum=1
        ),
        heartbeat_s=expect_number(
            obj.get("heartbeat_s", defaults.heartbeat_s), child(path, "heartbeat_s"), positive=True
        ),
        idle_s=expect_number(obj.get("idle_s", defaults.idle_s), child(path, "idle_s"), positive=True),
        max_message_bytes=(
            None
            if max_bytes is None
            else expect_int(max_bytes, child(path, "max_message_bytes"), minimum=1024)
        ),
    )
