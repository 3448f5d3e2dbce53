"""A filesystem *resource* server built on the official ``mcp`` Python SDK, for the
tests of the URI rule.

It publishes every file under ``--root`` as a resource at ``file:///projects/<path>``,
the way a filesystem server in a container sees its mount (``/projects``), so two of
them on two directories publish the same-looking URIs with different contents: the
case ``actors/router/uris.py`` qualifies. (``@modelcontextprotocol/server-filesystem``
serves files through tools only and publishes no resources.)
"""

from __future__ import annotations

import argparse
import mimetypes
from pathlib import Path

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.resources import FileResource
except ImportError:  # pragma: no cover - mcp 1.x
    from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[assignment]
    from mcp.server.fastmcp.resources import FileResource  # type: ignore[no-redef]

MOUNT = "file:///projects"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", required=True, help="the directory published at /projects")
    parser.add_argument("--name", default="fs-resources", help="the server's name in initialize")
    args = parser.parse_args()
    root = Path(args.root).resolve()
    server = MCPServer(args.name)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = path.relative_to(root).as_posix()
        mime = mimetypes.guess_type(path.name)[0] or "text/plain"
        server.add_resource(FileResource(uri=f"{MOUNT}/{relative}", name=relative, path=path, mime_type=mime))
    server.run()


if __name__ == "__main__":
    main()
