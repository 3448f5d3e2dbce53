"""Warm spares count toward ``bridge.max_processes``: a spare is one of the bridge's
processes while it lives, a take moves it to the session (counted once), the pool
refills only while there is room, and a session evicts another server's spare rather
than be refused (sessions before spares)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from actors.protocol import bridge_envelope as env
from supervisor.settings.model import BridgeSettings
from tests.support.admin import Running
from tests.support.bridge import alive, connected, exported, hub_running, none_alive

pytestmark = pytest.mark.real_peer

SETTLE_S = 0.3  # long enough for a keeper with room to have started a spawn


async def processes(running: Running) -> int:
    """What the hub counts toward its cap (its ``/metrics`` gauge)."""
    metrics = (await running.http().request("GET", "/metrics")).body.decode()
    (line,) = [line for line in metrics.splitlines() if line.startswith("mcp_supervisor_bridge_processes ")]
    return int(float(line.split()[1]))


async def test_spares_fill_only_what_sessions_leave_of_the_cap(tmp_path: Path) -> None:
    bridge = BridgeSettings(max_processes=2)
    async with (
        hub_running(tmp_path, exported("mini", warm=2), bridge=bridge) as running,
        connected(running) as client,
    ):
        warm = running.sup.warm
        with trio.fail_after(10):
            spares = await warm.wait_for("mini", lambda pids: len(pids) == 2)
            assert await processes(running) == 2  # two spares, no session: the cap is full
            first = await client.open("mini", 1)  # takes a spare: still two processes
            await trio.sleep(SETTLE_S)
            assert len(warm.idle("mini")) == 1 and await processes(running) == 2  # no refill over the cap
            await client.open("mini", 2)
            await trio.sleep(SETTLE_S)
            assert warm.idle("mini") == () and await processes(running) == 2
            listing = (await running.http().request("GET", "/v1/bridge/sessions")).json()["sessions"]
            assert sorted(s["pid"] for s in listing) == sorted(spares)  # both taken, none spawned
            await client.send(env.session_open("mini", id=3))
            refused, _ = await client.until(lambda f: f.type == env.OPEN_RESULT and f.id == 3)
            assert refused.data["error"]["code"] == "too_many_processes"
            await client.send(env.session_close(first))
            (fresh,) = await warm.wait_for("mini", lambda pids: len(pids) == 1)  # its place is refilled
            assert fresh not in spares and await processes(running) == 2


async def test_a_session_evicts_another_servers_spare_rather_than_be_refused(tmp_path: Path) -> None:
    bridge = BridgeSettings(max_processes=1)
    specs = (exported("warm", warm=1), exported("cold"))
    async with hub_running(tmp_path, *specs, bridge=bridge) as running, connected(running) as client:
        warm = running.sup.warm
        with trio.fail_after(10):
            (spare,) = await warm.wait_for("warm", lambda pids: len(pids) == 1)
            sid = await client.open("cold")
            init = await client.initialize(sid)
            assert init["result"]["serverInfo"]["name"] == "mini-server"
            await none_alive([spare])  # its place went to the session
            await trio.sleep(SETTLE_S)
            assert warm.idle("warm") == () and await processes(running) == 1
            await client.send(env.session_close(sid))
            (back,) = await warm.wait_for("warm", lambda pids: len(pids) == 1)
            assert alive(back) and await processes(running) == 1


async def test_spares_respect_the_cap_from_the_start(tmp_path: Path) -> None:
    """Keepers start with the supervisor, before the hub that owns the cap: they wait
    for it rather than fill every warm server's spares past the cap."""
    bridge = BridgeSettings(max_processes=1)
    specs = (exported("one", warm=3), exported("two", warm=3))
    async with hub_running(tmp_path, *specs, bridge=bridge) as running:
        warm = running.sup.warm
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:  # the first spare, of either server

                async def first(server: str) -> None:
                    await warm.wait_for(server, bool)
                    nursery.cancel_scope.cancel()

                for server in ("one", "two"):
                    nursery.start_soon(first, server)
        await trio.sleep(SETTLE_S)
        assert warm.held(lambda spec: spec.bridge) == 1 and await processes(running) == 1
