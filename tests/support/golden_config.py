"""The config every web-tier golden runs with, and the names its cases use.

Tokens of the three roles, a small ``gateway.max_message_bytes`` (and the bridge's
frame bound), an allowed browser origin for the bridge, and two mini servers, both
eager so their tools are listed before the first request: ``mini`` (the gateway's)
and ``web`` (``bridge: true``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")
CLI = [str(Path(sys.executable).with_name("mcp-supervisor"))]
"""The installed command (the project's entry point): it stays when modules move."""

ALICE = "alice-token-0123456789"  # tenant alice, role tenant
OPS = "ops-token-0123456789abcd"  # tenant ops, role operator
PEER = "peer-token-0123456789abc"  # tenant edge, role peer
BOUND = 4096  # gateway.max_message_bytes and bridge.max_message_bytes
APP_ORIGIN = "https://app.example"  # bridge.allowed_origins
DEEP = b"[" * 1500 + b"]" * 1500
"""JSON nested past the 1024 levels the parser reads, well within ``BOUND``."""

SERVERS: Mapping[str, Mapping[str, Any]] = {
    "mini": {"command": [sys.executable, MINI], "start": "eager", "trusted": True},
    "web": {"command": [sys.executable, MINI], "start": "eager", "trusted": True, "bridge": True},
}


def write_config(directory: Path, servers: Sequence[str] = tuple(SERVERS)) -> Path:
    """The config file, with ``servers`` (names of ``SERVERS``)."""
    config = {
        "servers": {name: SERVERS[name] for name in servers},
        "admin": {
            "tokens": {
                ALICE: "alice",
                OPS: {"tenant": "ops", "role": "operator"},
                PEER: {"tenant": "edge", "role": "peer"},
            }
        },
        "gateway": {"max_message_bytes": BOUND},
        "bridge": {"allowed_origins": [APP_ORIGIN], "max_message_bytes": BOUND},
        "tool_search": {"enabled": False},
    }
    path = directory / "config.json"
    path.write_text(json.dumps(config, indent=1))
    return path


def clean_env() -> dict[str, str]:
    """This process's environment without our own variables (a developer's config)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MCP_SUPERVISOR")}
