"""The catalog epoch moves only when what a turn would see changes (docs/turns.md):
failing retries make none, a restart two, a real change one. Through
``Supervisor.open``: fake servers on virtual time, a real subprocess for a restart."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from actors.connection.messages import Control
from actors.connection.states import State
from actors.router.catalog import Catalog
from actors.spec import ServerSpec, Start
from actors.transports.base import Transport
from supervisor import Supervisor
from supervisor.settings.model import Config, ToolSearchSettings
from tests.support.fakes import FakeServer
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")
OBJECT = {"type": "object"}
BOUND_S = 20.0


def tool(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": OBJECT}


def fake(name: str, **options: Any) -> ServerSpec:
    options.setdefault("start", Start.EAGER)
    options.setdefault("trusted", True)
    options.setdefault("reconnect_schedule_s", (1.0,))
    return ServerSpec(name, command=("fake",), **options)


def connector_of(
    servers: dict[str, FakeServer],
) -> Callable[[ServerSpec], AbstractAsyncContextManager[Transport]]:
    def connect(spec: ServerSpec) -> AbstractAsyncContextManager[Transport]:
        return servers[spec.name].connector(spec)

    return connect


@asynccontextmanager
async def running(
    servers: dict[str, FakeServer], specs: tuple[ServerSpec, ...], tmp_path: Path, *, search: Any = False
) -> AsyncIterator[Supervisor]:
    config = Config(servers=specs, tool_search=ToolSearchSettings(enabled=search))
    async with Supervisor.open(config, state_dir=tmp_path, connector=connector_of(servers)) as sup:
        yield sup


async def until(sup: Supervisor, predicate: Callable[[Catalog], bool]) -> Catalog:
    with trio.fail_after(BOUND_S):
        return await sup.router.cell.wait_until(predicate)


def in_state(name: str, state: State) -> Callable[[Catalog], bool]:
    return lambda catalog: catalog.servers[name].state is state


async def test_failing_retries_make_no_epochs_and_a_real_change_still_does(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    good, bad = FakeServer([tool("echo", "Echo text back")]), FakeServer([tool("ping", "Ping")])
    bad.fail_connect = True
    specs = (fake("good"), fake("bad"))
    async with running({"good": good, "bad": bad}, specs, tmp_path) as sup:
        await until(sup, in_state("good", State.STEADY))
        await until(sup, lambda c: c.servers["bad"].attempt >= 2)
        epoch = sup.router.cell.current.epoch
        await trio.sleep(30.0)  # a retry every second, each one failing
        assert len(bad.connect_times) >= 25
        assert sup.router.cell.current.epoch == epoch  # nothing a turn would see changed
        assert sup.servers()["bad"].attempt >= 25  # ...while the status kept moving

        good.tools.append(tool("shout", "Shout text back"))  # a real change: new tools
        await good.current.notify("notifications/tools/list_changed")
        await until(sup, lambda c: "good_shout" in c.tools)
        assert sup.router.cell.current.epoch == epoch + 1
        bad.fail_connect = False  # and another: the server comes back
        await until(sup, in_state("bad", State.STEADY))
        assert sup.router.cell.current.epoch in (epoch + 2, epoch + 3)  # available; maybe its tools


async def test_a_restart_moves_the_epoch_twice(tmp_path: Path) -> None:
    spec = ServerSpec(
        "mini", command=(sys.executable, MINI), start=Start.EAGER, trusted=True, shutdown_grace_s=0.5
    )
    config = Config(servers=(spec,), tool_search=ToolSearchSettings(enabled=False))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        cell = sup.router.cell
        with trio.fail_after(BOUND_S):
            await cell.wait_until(in_state("mini", State.STEADY))
            for _ in range(2):
                before = cell.current.epoch
                await sup.command("mini", Control.RESTART)
                seen = [await cell.wait_until(lambda c: not c.servers["mini"].available)]
                while seen[-1].servers["mini"].state is not State.STEADY:
                    seen.append(await cell.wait_until(lambda c, last=seen[-1]: c is not last))
                states = [c.servers["mini"].state for c in seen]
                assert State.TEARDOWN in states or State.RESOLVE in states, states
                # Down, then up: two epochs, however many states it walked through.
                assert [c.epoch for c in seen] == [before + 1] * (len(seen) - 1) + [before + 2], states


async def test_a_listing_whose_ttl_ran_out_is_read_again_and_moves_the_epoch_only_on_change(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """``ttlMs`` on ``tools/list`` (2026-07-28): the list is read again in the
    background when it goes stale, with no ``list_changed``; the epoch moves only when
    the tools did."""
    server = FakeServer([tool("echo", "Echo text back")])
    server.list_extra = {"ttlMs": 30_000, "cacheScope": "public"}
    async with running({"far": server}, (fake("far"),), tmp_path) as sup:
        await until(sup, in_state("far", State.STEADY))
        epoch = sup.router.cell.current.epoch
        assert server.list_calls == 1
        await trio.sleep(29.0)
        assert server.list_calls == 1  # still fresh
        await trio.sleep(2.0)
        assert server.list_calls == 2  # stale: read again
        await until(sup, in_state("far", State.STEADY))
        assert sup.router.cell.current.epoch == epoch  # the same tools: no new epoch
        server.tools.append(tool("shout", "Shout text back"))
        await trio.sleep(30.0)  # the timer restarted with the second listing
        await until(sup, lambda c: "far_shout" in c.tools)
        assert server.list_calls == 3
        assert sup.router.cell.current.epoch == epoch + 1
