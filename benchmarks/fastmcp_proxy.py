"""fastmcp's ``create_proxy`` in front of one backend, served over Streamable HTTP, for
``bench_fronts.py`` (runs in fastmcp's own virtualenv, see ``peers.py``):

    python benchmarks/fastmcp_proxy.py PORT URL
    python benchmarks/fastmcp_proxy.py PORT -- COMMAND [ARGS...]

A URL backend is reached over Streamable HTTP, a command over stdio; the proxy serves
``http://127.0.0.1:PORT/mcp`` the way fastmcp's documentation shows.
"""

from __future__ import annotations

import logging
import sys

from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy


def main(argv: list[str]) -> None:
    port = int(argv[0])
    if argv[1] == "--":
        target: object = StdioTransport(command=argv[2], args=argv[3:])
    else:
        target = argv[1]
    logging.disable(logging.WARNING)
    create_proxy(target, name="bench-proxy").run(
        transport="http", host="127.0.0.1", port=port, show_banner=False, log_level="warning"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
