"""What the tests of ``supervisor.aio`` share: an asyncio host run from a sync test
function (pytest-trio's trio_mode claims every ``async def`` test as a Trio test), and
waits on a supervisor's servers, bounded."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from actors.connection.states import State
from actors.router.catalog import ServerView
from actors.spec import ServerSpec
from supervisor.aio import Supervisor
from tests.support.paths import SERVERS

T = TypeVar("T")
MINI = str(SERVERS / "mini_server.py")
EVERYTHING = str(SERVERS / "everything_server.py")


def host(main: Callable[[], Coroutine[Any, Any, T]], limit_s: float = 30.0) -> T:
    """``asyncio.run(main())``, failing after ``limit_s``."""

    async def bounded() -> T:
        async with asyncio.timeout(limit_s):
            return await main()

    return asyncio.run(bounded())


def mini(name: str, *flags: str, **options: Any) -> ServerSpec:
    """Our stdlib test server (tests/servers/mini_server.py), trusted, quick to stop."""
    options.setdefault("shutdown_grace_s", 0.5)
    options.setdefault("trusted", True)
    return ServerSpec(name=name, command=(sys.executable, MINI, *flags), **options)


async def until(check: Callable[[], object], limit_s: float = 5.0) -> None:
    """Once ``check()`` holds (a file a server writes; checked every 10 ms)."""
    async with asyncio.timeout(limit_s):
        while not check():  # noqa: ASYNC110 - polls what no event announces
            await asyncio.sleep(0.01)


async def servers_until(
    sup: Supervisor, done: Callable[[Mapping[str, ServerView]], bool], limit_s: float = 10.0
) -> Mapping[str, ServerView]:
    """The shared servers once ``done`` holds of them (checked every 10 ms)."""
    async with asyncio.timeout(limit_s):
        while not done(servers := sup.servers()):  # noqa: ASYNC110 - a snapshot, polled
            await asyncio.sleep(0.01)
    return servers


async def state_of(sup: Supervisor, name: str, state: State, limit_s: float = 10.0) -> ServerView:
    """The server's view once it is in ``state``."""
    servers = await servers_until(sup, lambda s: s[name].state is state, limit_s)
    return servers[name]
