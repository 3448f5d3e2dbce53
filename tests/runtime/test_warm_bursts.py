"""Warm spares after a burst of opens: the pool keeps as many as the burst for a while,
never above a process cap, then falls back to ``warm`` (real subprocesses, real time
with a short window: a virtual clock would jump past the window while a spawn runs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from actors.spec import Scope
from actors.transports.connector import TransportConnector
from actors.transports.spawned import Spawned
from supervisor.runtime import warm_demand
from supervisor.runtime.warm_pool import WarmPool
from tests.runtime.test_warm_pool import alive, warm_spec


async def closed(taken: list[Spawned | None]) -> None:
    for spare in taken:
        if spare is not None:
            await spare.aclose()


async def test_a_burst_of_opens_keeps_that_many_spares_for_a_while_then_warm_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(warm_demand, "DEMAND_WINDOW_S", 2.0)  # a minute, in the config
    spec = warm_spec(warm=1)
    connector = TransportConnector(tmp_path)
    pool = WarmPool(connector, [spec])
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(connector.run)
            async with pool.running():
                (first,) = await pool.wait_for("priv", lambda pids: len(pids) == 1)
                taken = [pool.take(spec) for _ in range(4)]  # four sessions at once; one spare waited
                assert [s.process.pid if s else None for s in taken] == [first, None, None, None]
                await closed(taken)
                burst = await pool.wait_for("priv", lambda pids: len(pids) == 4)
                assert all(alive(pid) for pid in burst) and pool.wanted("priv") == 4
                (kept,) = await pool.wait_for(  # and the others torn down (reaped)
                    "priv", lambda pids: len(pids) == 1 and pool.held(lambda s: True) == 1
                )
                assert kept == burst[0] and pool.wanted("priv") == 1  # the youngest went first
                assert not any(alive(pid) for pid in burst[1:])
            assert not alive(kept)
            nursery.cancel_scope.cancel()


async def test_the_spares_of_a_burst_stay_under_the_process_cap(tmp_path: Path) -> None:
    spec = warm_spec(warm=1, bridge=True, scope=Scope.SHARED)
    connector = TransportConnector(tmp_path)
    pool = WarmPool(connector, [spec], max_processes=lambda: 3)
    pool.cap.open()  # as the bridge's hub does: bridged spares count from here on
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(connector.run)
            async with pool.running():
                await pool.wait_for("priv", lambda pids: len(pids) == 1)
                await closed([pool.take(spec) for _ in range(8)])
                assert pool.wanted("priv") == 8
                await pool.wait_for("priv", lambda pids: len(pids) == 3)
                await trio.sleep(0.5)  # more than a refill's wait: nothing beyond the cap came
                assert len(pool.idle("priv")) == 3 and pool.held(lambda s: True) == 3
            nursery.cancel_scope.cancel()
