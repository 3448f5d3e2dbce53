"""The protocol era found is remembered per server in the store, across real restarts
of the supervisor (``Supervisor.open`` twice on one state directory), with our own
stdio server (a handshake-era one) as the peer; its ``--methods-log`` shows what
reached it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

from actors.connection.states import State
from actors.spec import ServerSpec, Start
from supervisor import Supervisor
from supervisor.settings.model import Config
from supervisor.store import DB_FILENAME, Store
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")


def mini(log: Path, *flags: str, **options: Any) -> ServerSpec:
    return ServerSpec(
        name="mini",
        command=(sys.executable, MINI, "--methods-log", str(log), *flags),
        start=Start.EAGER,
        trusted=True,
        shutdown_grace_s=0.3,
        **options,
    )


def methods(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def stored_eras(state_dir: Path) -> dict[str, str]:
    with Store.open(state_dir / DB_FILENAME) as store:
        return store.eras()


async def test_the_next_start_sends_initialize_without_a_probe(tmp_path: Path) -> None:
    log = tmp_path / "methods.log"
    config = Config(servers=(mini(log),))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        with trio.fail_after(10):
            await sup.router.cell.wait_until(lambda c: c.servers["mini"].state is State.STEADY)
    assert methods(log)[:2] == ["server/discover", "initialize"]  # found by the probe
    assert stored_eras(tmp_path) == {"mini": "2025-11-25"}

    log.unlink()
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        with trio.fail_after(10):
            await sup.router.cell.wait_until(lambda c: c.servers["mini"].state is State.STEADY)
        assert sup.servers()["mini"].protocol_version == "2025-11-25"
    assert "server/discover" not in methods(log)
    assert methods(log)[0] == "initialize"
    assert stored_eras(tmp_path) == {"mini": "2025-11-25"}


async def test_a_remembered_era_that_fails_is_forgotten_in_the_store(tmp_path: Path) -> None:
    with Store.open(tmp_path / DB_FILENAME) as store:
        store.save_era("mini", "2025-11-25", 1.0)  # learned by an earlier run
    log = tmp_path / "methods.log"
    # The server now exits on initialize: the remembered era fails.
    config = Config(servers=(mini(log, "--exit-during-init", reconnect_schedule_s=(0.05,)),))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        with trio.fail_after(10):  # the second attempt has failed too
            await sup.router.cell.wait_until(
                lambda c: c.servers["mini"].attempt >= 2 and c.servers["mini"].state is State.BACKOFF
            )
    # The remembered era was tried first; once it failed, the next attempt probed.
    assert methods(log)[:3] == ["initialize", "server/discover", "initialize"]
    assert stored_eras(tmp_path) == {}
