"""begin_turn over a settled catalog is O(1): what it derives from a catalog epoch or
from the config is found once per epoch / config, not once per turn."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio

from actors.connection.messages import ConnectionMessage
from actors.connection.spec import Scope, ServerSpec
from actors.connection.states import State
from actors.router.catalog import Catalog, ServerView
from supervisor import sessions
from supervisor.sessions import Session
from supervisor.settings.model import Config, ToolSearchSettings


def _catalog(epoch: int, states: dict[str, State]) -> Catalog:
    send, _receive = trio.open_memory_channel[ConnectionMessage](1)
    servers = {
        name: ServerView(name, ServerSpec(name), send, state=state, available=state is State.STEADY)
        for name, state in states.items()
    }
    return Catalog(epoch, servers)


def _session(catalog: Catalog, config: Config) -> tuple[Session, Any]:
    cell = SimpleNamespace(current=catalog)
    supervisor: Any = SimpleNamespace(config=config, router=SimpleNamespace(cell=cell))
    nursery: Any = None  # no private server is ever spawned here
    return Session(supervisor, nursery), cell


async def test_a_turn_over_an_unchanged_catalog_walks_no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    real = sessions._settled

    def counting(view: ServerView) -> bool:
        checked.append(view.name)
        return real(view)

    monkeypatch.setattr(sessions, "_settled", counting)
    names = {f"s{i}": State.STEADY for i in range(50)}
    config = Config(tool_search=ToolSearchSettings(enabled=False))
    session, cell = _session(_catalog(1, names), config)
    first = await session.begin_turn()
    assert len(checked) == 50
    checked.clear()
    second = await session.begin_turn()
    assert checked == []
    assert second.catalog is first.catalog
    assert second.id != first.id
    cell.current = _catalog(2, {**names, "s0": State.BACKOFF})  # a new epoch is looked at again
    third = await session.begin_turn()
    assert len(checked) == 50
    assert third.epoch == 2


async def test_session_scoped_specs_are_found_once_per_config(monkeypatch: pytest.MonkeyPatch) -> None:
    spawned: list[str] = []

    async def spawn(self: Session, spec: ServerSpec) -> None:
        spawned.append(spec.name)
        self._private[spec.name] = (trio.open_memory_channel[ConnectionMessage](1)[0], trio.Event())

    monkeypatch.setattr(Session, "_spawn_private", spawn)
    config = Config(
        servers=(ServerSpec("shared"), ServerSpec("mine", scope=Scope.SESSION)),
        tool_search=ToolSearchSettings(enabled=False),
    )
    session, _cell = _session(_catalog(1, {"shared": State.STEADY}), config)
    await session.begin_turn()
    await session.begin_turn()
    assert spawned == ["mine"]
    assert session._session_specs == (config, (config.servers[1],))
