"""Replicas for the tests: a config with a ``cluster`` section on a store URL, and a
supervisor with a fake server served on 127.0.0.1:0."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from actors.broadcast import Subscription
from actors.connection.states import State
from actors.spec import ServerSpec, Start
from supervisor.server.serving import serve
from supervisor.service import Supervisor
from supervisor.settings.model import (
    AdminSettings,
    ClusterSettings,
    Config,
    Role,
    StoreSettings,
    TokenGrant,
    TrustSettings,
)
from tests.support.admin import ALICE, Running
from tests.support.fakes import FakeServer

OPS = "ops-token-0123456789abc"
TOOL = {"name": "echo", "description": "Echo text back", "inputSchema": {"type": "object"}}


def replica_config(url: str | None, replica: str, *, approval_timeout_s: float = 30) -> Config:
    """A trusted fake server; the operator ``OPS`` and tenant ``ALICE``; with ``url``, a
    cluster section naming ``replica`` (None: one process on SQLite)."""
    spec = ServerSpec(name="fake", command=("fake",), start=Start.EAGER, trusted=True)
    return Config(
        servers=(spec,),
        admin=AdminSettings(tokens={OPS: TokenGrant("ops", Role.OPERATOR), ALICE: "alice"}),
        trust=TrustSettings(approval_timeout_s=approval_timeout_s),
        store=StoreSettings(url=url),
        cluster=None if url is None else ClusterSettings(replica, (b"k" * 32,)),
    )


@asynccontextmanager
async def replica_running(config: Config, state_dir: Path) -> AsyncIterator[Running]:
    """A supervisor with a fake server, served on 127.0.0.1:0."""
    server = FakeServer([TOOL])
    async with Supervisor.open(config, state_dir=state_dir, connector=server.connector) as sup:
        with trio.fail_after(20):
            await sup.router.cell.wait_until(lambda c: c.servers["fake"].state is State.STEADY)
        async with trio.open_nursery() as nursery:
            url: str = await nursery.start(serve, sup, "127.0.0.1:0")
            yield Running(sup, url)
            nursery.cancel_scope.cancel()


def received(feed: Subscription[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The events waiting in ``feed``, in order."""
    events = []
    while True:
        try:
            events.append(feed.events.receive_nowait())
        except trio.WouldBlock:
            return events
