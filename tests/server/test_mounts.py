"""The one mount table (``supervisor/server/mounts.py``): which app a request reaches."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.server.mounts import Mounts, routed_path


@pytest.mark.parametrize(
    ("path", "root", "routed"),
    [
        ("/mcp", "", "/mcp"),
        ("//mcp", "", "/mcp"),
        ("http://127.0.0.1:8765/mcp", "", "/mcp"),
        ("/prefix/mcp", "/prefix", "/mcp"),
        ("/mcp", "/prefix", None),  # outside its root path: no path of ours
        ("/prefix", "/prefix", None),
        ("/mcpx", "", "/mcpx"),
    ],
)
def test_a_path_is_read_as_the_apps_route_it(path: str, root: str, routed: str | None) -> None:
    assert routed_path({"path": path, "root_path": root}) == routed


def test_each_request_reaches_one_app() -> None:
    gateway, admin = object(), object()
    mounts = Mounts({"/mcp": gateway}, admin)

    def app(kind: str, path: str) -> Any:
        return mounts.app_for({"type": kind, "path": path, "root_path": ""})

    assert app("http", "/mcp") is gateway and app("websocket", "/mcp") is gateway
    assert app("http", "/mcp/") is admin and app("http", "/v1/servers") is admin
    assert mounts.app_for({"type": "lifespan"}) is admin
