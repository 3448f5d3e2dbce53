"""The ``gateway`` section of a config file (``GatewaySettings``)."""

from __future__ import annotations

from collections.abc import Sequence

from actors.spec import ServerSpec

from .model import GatewaySettings
from .values import Invalid, check_keys, child, expect_bool, expect_int, expect_number, expect_object

_KEYS = ("prefix", "max_message_bytes", "session_idle_s", "max_sessions_per_tenant")


def read_gateway(value: object, path: str, servers: Sequence[ServerSpec]) -> GatewaySettings:
    """The gateway settings at ``path``; ``prefix: false`` only over exactly one server."""
    obj = expect_object(value, path)
    check_keys(obj, path, _KEYS)
    defaults = GatewaySettings()
    prefix = expect_bool(obj.get("prefix", defaults.prefix), child(path, "prefix"))
    if not prefix and len(servers) != 1:
        raise Invalid(
            child(path, "prefix"),
            f"false is accepted only with exactly one server (a plain proxy of one backend); "
            f"this config has {len(servers)}: remove it, or keep one server",
        )
    return GatewaySettings(
        prefix=prefix,
        max_message_bytes=expect_int(
            obj.get("max_message_bytes", defaults.max_message_bytes),
            child(path, "max_message_bytes"),
            minimum=1024,
        ),
        session_idle_s=expect_number(
            obj.get("session_idle_s", defaults.session_idle_s), child(path, "session_idle_s"), positive=True
        ),
        max_sessions_per_tenant=expect_int(
            obj.get("max_sessions_per_tenant", defaults.max_sessions_per_tenant),
            child(path, "max_sessions_per_tenant"),
            minimum=1,
        ),
    )
