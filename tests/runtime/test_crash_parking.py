"""A bug in our own connection actor fails only its server: past the restart intensity
the server is parked in backoff (condition ``crashed``) and retried at its schedule's
last delay, while the supervisor and every other server keep running."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors.connection import retry
from actors.connection.messages import Control
from actors.connection.schedule import jittered
from actors.connection.states import State
from actors.spec import ServerSpec, Start
from actors.transports import spawned
from actors.transports.base import Transport
from supervisor import Supervisor
from supervisor.settings.model import Config
from tests.support.admin import admin_running, config_of, conforms, mini_spec, wait_for
from tests.support.fakes import FakeServer

BUG = "a bug in our own code"


class BuggyConnector:
    """The fake server's connector, but opening the servers in ``broken`` raises a plain
    exception: what a bug in the connection path looks like to the actor."""

    def __init__(self, server: FakeServer, broken: set[str]) -> None:
        self.server = server
        self.broken = broken
        self.attempts: list[float] = []

    def __call__(self, spec: ServerSpec) -> AbstractAsyncContextManager[Transport]:
        if spec.name in self.broken:
            return self._crash(spec)
        return self.server.connector(spec)

    @asynccontextmanager
    async def _crash(self, spec: ServerSpec) -> AsyncIterator[Transport]:
        self.attempts.append(trio.current_time())
        raise RuntimeError(BUG)
        yield  # pragma: no cover


def parked(sup: Supervisor, name: str) -> bool:
    view = sup.servers()[name]
    return view.state is State.BACKOFF and view.condition == "crashed"


def seeded(monkeypatch: pytest.MonkeyPatch, seed: int, last_delay: float, count: int) -> list[float]:
    """Seed the process's jitter draws; the first ``count`` parking delays they give a
    server whose schedule ends in ``last_delay`` (the default jitter, a tenth)."""
    monkeypatch.setattr(retry, "GENERATOR", random.Random(seed))
    draws = random.Random(seed)
    return [jittered(last_delay, 0.1, draws.random()) for _ in range(count)]


async def test_a_crashing_actor_parks_its_server_and_retries_at_the_last_delay(
    thread_safe_clock: trio.testing.MockClock,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The last delay, 7 s, jittered anew at each parking: servers parked together retry apart.
    first, second = seeded(monkeypatch, 3, 7.0, 2)
    connector = BuggyConnector(FakeServer(), {"buggy"})
    config = Config(
        servers=(
            ServerSpec("good", command=("fake",), start=Start.EAGER, trusted=True),
            ServerSpec("buggy", command=("fake",), start=Start.EAGER, reconnect_schedule_s=(1.0, 2.0, 7.0)),
        )
    )
    async with Supervisor.open(config, state_dir=tmp_path, connector=connector) as sup:
        with trio.fail_after(60):
            await sup.router.cell.wait_until(lambda c: c.servers["good"].state is State.STEADY)
            await sup.router.cell.wait_until(lambda c: parked(sup, "buggy"))
        parked_at = trio.current_time()
        view = sup.servers()["buggy"]
        assert len(connector.attempts) == 4  # the first start and three quick restarts
        assert view.attempt == 3 and view.next_retry_at == pytest.approx(parked_at + first, abs=0.01)
        assert view.last_error is not None
        crashed = f"its connection actor crashed (RuntimeError: {BUG}); next try in {first:.3g} s"
        assert crashed in view.last_error and abs(first - 7.0) > 0.05
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert [r.getMessage() for r in errors][-1].startswith("child crashed too often; parked")
        assert errors[-1].exc_info is not None  # the traceback is in the log

        # The rest of the supervisor serves on.
        async with sup.session() as session:
            turn = await session.begin_turn()
            assert (await turn.call("good_echo", {"text": "hi"})).ok
            assert (await turn.call("buggy_echo", {})).error.code in ("unavailable", "unknown_tool")

        # One try at the last delay; crashing again parks it again at once.
        await trio.sleep_until(parked_at + first + 0.5)
        assert connector.attempts[4:] == [pytest.approx(parked_at + first, abs=0.01)]
        assert parked(sup, "buggy")
        assert sup.servers()["buggy"].next_retry_at == pytest.approx(parked_at + first + second, abs=0.01)

        # An operator restart tries at once; with the bug gone the server comes up.
        connector.broken.clear()
        await sup.command("buggy", Control.RESTART)
        with trio.fail_after(1):
            await sup.router.cell.wait_until(lambda c: c.servers["buggy"].state is State.STEADY)
        assert sup.servers()["buggy"].condition is None


async def test_the_admin_api_and_status_show_a_parked_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = spawned.plan_launch

    def buggy_plan(spec: ServerSpec, *args: Any) -> Any:
        if spec.name == "buggy":
            raise KeyError("not a transport error")
        return plan(spec, *args)

    monkeypatch.setattr(spawned, "plan_launch", buggy_plan)
    (delay,) = seeded(monkeypatch, 1, 30.0, 1)  # 27.8 s: the jittered delay is what is shown
    config = config_of(mini_spec("good"), mini_spec("buggy", reconnect_schedule_s=(30.0,)))
    async with admin_running(config, tmp_path) as running:
        http = running.http()

        def settled(body: Any) -> bool:
            by_name = {s["name"]: s for s in body["servers"]}
            return by_name["good"]["state"] == "steady" and by_name["buggy"]["condition"] == "crashed"

        servers = await wait_for(http, "/v1/servers", settled)
        buggy = {s["name"]: s for s in servers["servers"]}["buggy"]
        assert buggy["state"] == "backoff" and delay - 5 < buggy["retry_in_s"] <= delay
        assert "its connection actor crashed (KeyError: 'not a transport error')" in buggy["last_error"]
        conforms("list_servers", await http.request("GET", "/v1/servers"))
        health = await http.request("GET", "/v1/health")
        assert health.status == 200
