"""begin_turn over a settled catalog is O(1): what it derives from a catalog epoch is
found once per epoch, and the session-scoped servers once per supervisor (in its
``SessionServices``), not once per turn."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio

from actors.connection.messages import ConnectionMessage
from actors.connection.states import State
from actors.router.catalog import Catalog, ServerView
from actors.spec import Scope, ServerSpec
from supervisor.calls.exposure import Exposures
from supervisor.sessions import session as sessions
from supervisor.sessions.session import Session, SessionServices
from supervisor.settings.model import ToolSearchSettings


def _catalog(epoch: int, states: dict[str, State]) -> Catalog:
    send, _receive = trio.open_memory_channel[ConnectionMessage](1)
    servers = {
        name: ServerView(name, ServerSpec(name), send, state=state, available=state is State.STEADY)
        for name, state in states.items()
    }
    return Catalog(epoch, servers)


def _session(catalog: Catalog, private: tuple[ServerSpec, ...] = ()) -> tuple[Session, Any]:
    cell: Any = SimpleNamespace(current=catalog)
    calls: Any = SimpleNamespace(tool_search=ToolSearchSettings(enabled=False), exposure=Exposures())
    unused: Any = None  # no private server is ever spawned, no call made, here
    connections: Any = SimpleNamespace(client_capabilities={})  # what a session declares by default
    services = SessionServices(cell, unused, connections, private, unused, unused, calls)
    return Session(services, unused), cell


async def test_a_turn_over_an_unchanged_catalog_walks_no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    real = sessions._settled

    def counting(view: ServerView) -> bool:
        checked.append(view.name)
        return real(view)

    monkeypatch.setattr(sessions, "_settled", counting)
    names = {f"s{i}": State.STEADY for i in range(50)}
    session, cell = _session(_catalog(1, names))
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


async def test_session_scoped_servers_are_spawned_once_per_session(monkeypatch: pytest.MonkeyPatch) -> None:
    spawned: list[str] = []

    async def spawn(self: Session, spec: ServerSpec) -> None:
        spawned.append(spec.name)
        self._private[spec.name] = (trio.open_memory_channel[ConnectionMessage](1)[0], trio.Event())

    monkeypatch.setattr(Session, "_spawn_private", spawn)
    mine = ServerSpec("mine", scope=Scope.SESSION)
    session, _cell = _session(_catalog(1, {"shared": State.STEADY}), (mine,))
    await session.begin_turn()
    await session.begin_turn()
    assert spawned == ["mine"]
