"""The ASGI app that ``serve`` hands its web server, built in this process.

Only the goldens that must speak ASGI themselves (``tests/end_to_end/test_golden_asgi.py``: a
``root_path``, which no HTTP client can set; a body that never ends, on a clock of
the test's) build it, and only through ``served_front``. When the web tier is
rewritten (new app, new package paths), this function is the one place to repoint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
from hypercorn.typing import ASGIFramework

from supervisor.gateway.peer import PASSED_ON
from supervisor.server import Server, listen
from supervisor.service import Supervisor
from supervisor.settings.loader import load_config

BIND = "127.0.0.1:0"


@asynccontextmanager
async def served_front(config: Path, state_dir: Path) -> AsyncIterator[ASGIFramework]:
    """What ``serve --config config`` runs, while it runs: the ASGI callable, its
    lifespan already started (the web server is running it too, on a port of its own),
    the supervisor and its gateways up. It drains and stops on exit."""
    loaded = load_config(config)
    async with Supervisor.open(loaded, state_dir=state_dir, client_capabilities=PASSED_ON) as supervisor:
        with listen(BIND) as listener:
            server = Server(supervisor, BIND, listener)
            async with trio.open_nursery() as nursery:
                await nursery.start(server.run)
                try:
                    yield server.apps.app
                finally:
                    server.stop()
