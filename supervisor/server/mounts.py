"""The one mount table: each request to the one app that serves its path.

As Hypercorn's ``DispatcherMiddleware``, with two differences the apps need: a mount
is one exact path, not a prefix (``/mcp`` is the gateway's, ``/mcpx`` and ``/mcp/``
are the admin API's 404s), and the path is read as Quart routes it, so every app
agrees on what a path names: without the ``root_path`` (a path outside the root path
is no path of ours), and with its leading slashes as one (``//mcp`` is ``/mcp``).
The lifespan is the default app's (Quart's); the mounted apps have none. A *tree* is the
exception: the console has ``/ui`` and every path under it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from hypercorn.typing import ASGIFramework, ASGIReceiveCallable, ASGISendCallable, Scope


def routed_path(scope: Mapping[str, Any]) -> str | None:
    """The path the apps route ``scope`` by, or None when it lies outside its root path."""
    path = str(scope.get("path", "/"))
    if not path.startswith("/"):
        path = urlsplit(path).path
    root = str(scope.get("root_path", ""))
    if root:
        if path == root or not path.startswith(root):
            return None
        path = path.removeprefix(root)
    return "/" + path.lstrip("/")


class Mounted(Protocol):
    """An app the table mounts at one path, and what it answers there."""

    @property
    def served(self) -> Mapping[str, str]:
        """Method → the route table's operation."""

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None: ...


class Mounts:
    """An ASGI app: ``mounts[path]`` for the paths mounted, ``default`` for the rest."""

    def __init__(
        self,
        mounts: Mapping[str, Mounted],
        default: ASGIFramework,
        trees: Mapping[str, ASGIFramework] | None = None,
    ) -> None:
        self.mounts = dict(mounts)
        self.default = default
        self.trees = dict(trees or {})
        """Apps mounted at a path and everything under it (``/ui``: the console)."""

    def app_for(self, scope: Scope) -> ASGIFramework:
        if scope["type"] == "lifespan":
            return self.default
        path = routed_path(scope)
        if path is None:
            return self.default
        for root, app in self.trees.items():
            if path == root or path.startswith(root + "/"):
                return app
        return self.mounts.get(path, self.default)

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        await self.app_for(scope)(scope, receive, send)
