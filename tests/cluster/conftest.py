"""Fixtures for replicas behind a load balancer."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path

import pytest
import trio

from tests.support.nginx import Nginx, needs_nginx, running_nginx

StartNginx = Callable[[Mapping[str, int]], Awaitable[Nginx]]


async def _hold(
    replicas: Mapping[str, int], folder: Path, task_status: trio.TaskStatus[Nginx] = trio.TASK_STATUS_IGNORED
) -> None:
    async with running_nginx(replicas, folder) as nginx:
        task_status.started(nginx)
        await trio.sleep_forever()


@pytest.fixture
def nginx_binary() -> str:
    """nginx's path; skips, saying why, without it (a sync fixture keeps the reason)."""
    return needs_nginx()


@pytest.fixture
async def nginx_for(nginx_binary: str, tmp_path: Path) -> AsyncIterator[StartNginx]:
    """``await nginx_for({"r1": port, ...})``: nginx with the shipped routing over those
    loopback ports, running until the test ends (skips when nginx is not installed)."""
    numbers = itertools.count()
    async with trio.open_nursery() as nursery:

        async def start(replicas: Mapping[str, int]) -> Nginx:
            started: Nginx = await nursery.start(_hold, replicas, tmp_path / f"nginx-{next(numbers)}")
            return started

        yield start
        nursery.cancel_scope.cancel()
