"""Warm session servers (``warm: N``): spares spawned before a session, taken once, replaced.

Real subprocesses (``tests/servers/mini_server.py --whoami`` says which process answers,
when it started and what ``initialize`` declared).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors.connection.schedule import jittered
from actors.log_events import event_name, record_fields
from actors.spec import Scope, ServerSpec
from actors.transports.connector import TransportConnector
from actors.transports.pidfiles import read_proc_stat
from actors.transports.process_group import spawned_process_groups
from supervisor import Supervisor, load_config
from supervisor.runtime.warm_pool import WarmPool
from supervisor.settings.loader import ConfigError
from supervisor.settings.model import Config
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")


def warm_spec(name: str = "priv", warm: int = 1, *flags: str, **options: Any) -> ServerSpec:
    options.setdefault("shutdown_grace_s", 0.5)
    options.setdefault("trusted", True)
    options.setdefault("scope", Scope.SESSION)
    return ServerSpec(name=name, command=(sys.executable, MINI, "--whoami", *flags), warm=warm, **options)


def alive(pid: int) -> bool:
    stat = read_proc_stat(pid)
    return stat is not None and stat.state != "Z"


async def whoami(session: Any, server: str = "priv") -> dict[str, Any]:
    result = await (await session.begin_turn()).call(f"{server}_whoami", {})
    assert result.ok, result.as_dict()
    answer: dict[str, Any] = json.loads(result.text)
    return answer


def since_boot_ticks() -> int:
    """Now, in the unit of ``/proc/<pid>/stat``'s start time (clock ticks since boot)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def spares_lost(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [record_fields(r) for r in caplog.records if event_name(r) == "warm spare lost"]


async def answer_elicitation(_server: str, _params: Any) -> dict[str, Any]:
    return {"action": "decline"}


async def test_a_new_session_adopts_a_spare_spawned_before_it_and_a_fresh_one_replaces_it(
    tmp_path: Path,
) -> None:
    config = Config(servers=(warm_spec(),))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        with trio.fail_after(10):
            (spare,) = await sup.warm.wait_for("priv", lambda pids: len(pids) == 1)
        started = read_proc_stat(spare)
        assert started is not None
        opened, opened_ticks = time.time(), since_boot_ticks()
        async with sup.session(elicitation=answer_elicitation) as session:
            me = await whoami(session)
            # The session's server is the spare: same pid, same process (start time),
            # started before the session opened, initialized after, with the session's
            # own capabilities.
            assert me["pid"] == spare
            now = read_proc_stat(spare)
            assert now is not None and now.start_time == started.start_time
            assert started.start_time <= opened_ticks and opened <= me["initialized"]
            assert "elicitation" in me["capabilities"]
            with trio.fail_after(10):
                (fresh,) = await sup.warm.wait_for("priv", lambda pids: len(pids) == 1 and spare not in pids)
            assert fresh != spare and alive(fresh)
            async with sup.session() as other:  # the next session takes the fresh one
                them = await whoami(other)
                assert them["pid"] == fresh
                assert "elicitation" not in them["capabilities"]
        # Never reused: the session's process ended with it.
        assert not alive(spare) and not alive(fresh)
        assert spare not in sup.warm.idle("priv") and fresh not in sup.warm.idle("priv")
        with trio.fail_after(10):
            (last,) = await sup.warm.wait_for("priv", lambda pids: len(pids) == 1)
    assert not alive(last)  # stopped at shutdown


def seeded_schedule(seed: int, delays: tuple[float, ...]) -> list[float]:
    """The delays a pool drawing from a generator seeded with ``seed`` waits (the default
    jitter, a tenth)."""
    seeded = random.Random(seed)
    return [jittered(delay, 0.1, seeded.random()) for delay in delays]


async def test_a_spare_that_dies_while_waiting_is_replaced_on_the_reconnect_schedule(
    tmp_path: Path, thread_safe_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    connector = TransportConnector(tmp_path)
    pool = WarmPool(connector, [warm_spec()], draw=random.Random(11).random)
    delays = seeded_schedule(11, (1.0, 2.0, 5.0))  # each a tenth or less from the schedule
    async with trio.open_nursery() as nursery:
        await nursery.start(connector.run)
        async with pool.running():
            (spare,) = await pool.wait_for("priv", lambda pids: len(pids) == 1)
            for delay in delays:
                killed_at = trio.current_time()
                os.kill(spare, signal.SIGKILL)
                (replacement,) = await pool.wait_for(
                    "priv", lambda pids, old=spare: len(pids) == 1 and old not in pids
                )
                waited = trio.current_time() - killed_at
                assert delay <= waited < delay + 0.5, (delay, waited)
                assert not alive(spare) and alive(replacement)
                spare = replacement
        assert not alive(spare)  # the pool's end tears its spares down
        nursery.cancel_scope.cancel()
    lost = spares_lost(caplog)
    assert [f["retry_in_s"] for f in lost] == pytest.approx(delays, abs=1e-3)
    assert "exited while waiting (status -9)" in lost[0]["reason"]


async def test_a_server_that_cannot_start_is_no_hot_respawn_loop(
    tmp_path: Path, thread_safe_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    connector = TransportConnector(tmp_path)
    pool = WarmPool(
        connector,
        [ServerSpec(name="ghost", command=("no-such-command-xyz",), scope=Scope.SESSION, warm=2)],
        draw=random.Random(12).random,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(connector.run)
        async with pool.running():
            await trio.sleep(30)
        nursery.cancel_scope.cancel()
    lost = spares_lost(caplog)
    schedule = seeded_schedule(12, (1.0, 2.0, 5.0, 15.0, 60.0))
    assert [f["retry_in_s"] for f in lost] == pytest.approx(
        schedule, abs=1e-3
    )  # 30 s: five tries, not thousands
    assert "not found on PATH" in lost[0]["reason"]


async def test_200_session_cycles_with_warm_1_leave_no_process(tmp_path: Path) -> None:
    before = set(spawned_process_groups())
    config = Config(servers=(warm_spec(),))
    seen: set[int] = set()
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        for _ in range(200):
            async with sup.session() as session:
                await session.begin_turn()
        async with sup.session() as session:
            seen.add((await whoami(session))["pid"])

        # The last session took a spare; its keeper refills what the pool wants when it
        # can (a busy machine may run the last session to its end first; 200 sessions
        # in a row are bursts, so it may want more than one), so the groups spawned are
        # read once those spares are there.
        def settled(pids: tuple[int, ...]) -> bool:  # none being spawned or torn down either
            return len(pids) == sup.warm.wanted("priv") == sup.warm.held(lambda spec: True)

        with trio.fail_after(10):
            idle = await sup.warm.wait_for("priv", settled)
        assert sup.store.folding is not None and sup.store.folding.pid is not None
        spawned = set(spawned_process_groups()) - before - {sup.store.folding.pid}  # not the audit folder
        # Each session had a process of its own; what still runs is the spares.
        assert len(spawned) >= 201 and 1 <= len(idle) <= 16
        assert sorted(pid for pid in spawned if alive(pid)) == sorted(idle)
        assert len(list((tmp_path / "pids").glob("*.json"))) == len(idle) + 1  # the spares' and the folder's
    assert [pid for pid in set(spawned_process_groups()) - before if alive(pid)] == []
    assert not list((tmp_path / "pids").glob("*.json"))


async def test_a_reload_stops_the_spares_of_a_changed_or_removed_server(tmp_path: Path) -> None:
    config = Config(servers=(warm_spec(), warm_spec("other", 1)))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        with trio.fail_after(10):
            (old,) = await sup.warm.wait_for("priv", lambda pids: len(pids) == 1)
            (kept,) = await sup.warm.wait_for("other", lambda pids: len(pids) == 1)
        changed = warm_spec("priv", 2, "--tools", "1")
        await sup.reload(Config(servers=(changed, config.servers[1])))
        assert not alive(old)  # torn down before the reload returned
        with trio.fail_after(10):
            new = await sup.warm.wait_for("priv", lambda pids: len(pids) == 2)
        assert old not in new and sup.warm.idle("other") == (kept,)
        async with sup.session() as session:  # the new spec's spare, with its extra tool
            turn = await session.begin_turn()
            assert "priv_tool_0" in turn.catalog.tools
        await sup.reload(Config(servers=(changed,)))
        assert not alive(kept) and sup.warm.idle("other") == ()


async def test_without_warm_nothing_is_kept(tmp_path: Path) -> None:
    config = Config(servers=(warm_spec(warm=0),))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        async with sup.session() as session:
            assert (await whoami(session))["pid"] > 0
        assert sup.warm.idle("priv") == () and sup.warm.count("priv") == 0


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"command": "x", "warm": 2}, 'set "scope": "session" (or "bridge": true), or remove \'warm\''),
        ({"command": "x", "scope": "session", "warm": 17}, "expected at most 16 spare processes, got 17"),
        ({"command": "x", "scope": "session", "warm": -1}, "expected a number of at least 0, got -1"),
        ({"command": "x", "scope": "session", "warm": "2"}, 'expected a whole number, got "2"'),
        ({"command": "x", "scope": "session", "warm": True}, "expected a whole number, got true"),
        (
            {"url": "https://example.com/mcp", "scope": "session", "warm": 1},
            "'warm' does not apply to a remote",
        ),
    ],
)
def test_a_bad_warm_is_a_config_error_naming_it(tmp_path: Path, entry: dict[str, Any], problem: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"servers": {"s": entry}}))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"config error: {path}: $.servers.s.warm: ")
    assert problem in caught.value.problem


def test_warm_is_read_for_session_and_bridge_servers(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    servers = {
        "a": {"command": "x", "scope": "session", "warm": 2},
        "b": {"command": "x", "bridge": True, "warm": 16},
        "c": {"command": "x", "scope": "session", "warm": 0},
        "d": {"command": "x", "scope": "session"},
    }
    path.write_text(json.dumps({"servers": servers}))
    assert [spec.warm for spec in load_config(path).servers] == [2, 16, 0, 0]


@pytest.mark.real_peer
async def test_a_bridge_session_takes_a_spare_raw(tmp_path: Path) -> None:
    from tests.support.bridge import connected, exported, hub_running

    async with hub_running(tmp_path, exported("mini", warm=1)) as running, connected(running) as client:
        warm = running.sup.warm
        with trio.fail_after(10):
            (spare,) = await warm.wait_for("mini", lambda pids: len(pids) == 1)
            sid = await client.open("mini")
            init = await client.initialize(sid, request_id=1)  # the client's own initialize, raw
            assert init["result"]["serverInfo"]["name"] == "mini-server"
            listing = (await running.http().request("GET", "/v1/bridge/sessions")).json()["sessions"]
            assert [s["pid"] for s in listing] == [spare]
            (fresh,) = await warm.wait_for("mini", lambda pids: len(pids) == 1 and spare not in pids)
        assert alive(fresh)


async def test_spares_torn_down_by_a_reload_count_until_they_are_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reload that drops a warm server: its spares still count toward a process cap
    while they are torn down (up to their shutdown grace), not from the moment the
    server left the config."""
    from actors.transports.spawned import Spawned

    closing, release = trio.Event(), trio.Event()
    original = Spawned.aclose

    async def held_open(self: Spawned) -> None:
        closing.set()
        await release.wait()
        await original(self)

    connector = TransportConnector(tmp_path)
    pool = WarmPool(connector, [warm_spec()])
    async with trio.open_nursery() as nursery:
        await nursery.start(connector.run)
        async with pool.running():
            with trio.fail_after(10):
                await pool.wait_for("priv", lambda pids: len(pids) == 1)
                monkeypatch.setattr(Spawned, "aclose", held_open)
                try:
                    async with trio.open_nursery() as reload:
                        reload.start_soon(pool.retune, [])
                        await closing.wait()
                        assert pool.held(lambda spec: True) == 1  # still alive: still counted
                        release.set()
                finally:
                    release.set()  # the teardown is shielded: never leave it waiting
                assert pool.held(lambda spec: True) == 0
        nursery.cancel_scope.cancel()
