"""How a ``Supervisor`` is put together and taken apart: what it is given reaches the
parts that use it, its fields are final, and its lifetimes end from the inside out."""

from __future__ import annotations

import ast
import inspect
import os
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.auth.authorizers import FollowRedirectAuthorizer
from actors.connection.messages import ServerListed
from actors.connection.states import State
from actors.router.actor import RouterActor
from actors.spec import Scope, ServerSpec, Start
from actors.transports.escapees import read_marker
from actors.transports.instances import InstanceLock, instance_is_live
from supervisor import Supervisor, service
from supervisor.runtime.one_for_one import OneForOne
from supervisor.sessions.session import Session
from supervisor.settings.model import Config, ToolSearchSettings
from supervisor.store import Store, StoreActor
from supervisor.store.folding import Folding
from supervisor.store.journal import AuditJournal
from tests.support.paths import REPO

ROOT = REPO
MINI = str(ROOT / "tests" / "servers" / "mini_server.py")


def _calls_of(name: str) -> list[tuple[str, ast.Call]]:
    found = []
    for path in sorted((ROOT / "supervisor").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
                found.append((str(path.relative_to(ROOT)), node))
    return found


def test_the_default_connector_is_built_in_one_place_with_the_authorizer() -> None:
    calls = _calls_of("TransportConnector")
    assert [where for where, _ in calls] == ["supervisor/service.py"], calls
    ((_, call),) = calls
    assert "authorizer" in {keyword.arg for keyword in call.keywords}


async def test_the_authorizer_reaches_the_connector_the_supervisor_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[Any] = []

    class Recording(service.TransportConnector):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append((self, kwargs.get("authorizer")))

    monkeypatch.setattr(service, "TransportConnector", Recording)
    authorizer = FollowRedirectAuthorizer()
    async with Supervisor.open(Config(), state_dir=tmp_path, authorizer=authorizer) as sup:
        assert built == [(sup.connector, authorizer)]


# ---------------------------------------------------------------- one phase


async def test_a_supervisors_fields_are_final(tmp_path: Path) -> None:
    async with Supervisor.open(Config(), state_dir=tmp_path) as sup:
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            sup.config = Config()  # type: ignore[misc]
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            sup._shared = None  # type: ignore[misc]


# ---------------------------------------------------------------- lifetimes


def _mini(name: str, **options: Any) -> ServerSpec:
    options.setdefault("shutdown_grace_s", 0.5)
    return ServerSpec(name=name, command=(sys.executable, MINI), trusted=True, **options)


def _marked(instance: str) -> set[str]:
    """The servers of ``instance`` that have a live process (by their marker)."""
    names = set()
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        owner, _, server = (read_marker(pid) or "").partition(":")
        if owner == instance:
            names.add(server)
    return names


async def test_teardown_runs_from_the_inside_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions, then connections (their servers gone), then the router (after folding
    their last states), then the store (written, its folder process stopped, then the
    journal folded), then the lock."""
    steps: list[tuple[str, set[str]]] = []
    instance = ""

    def record(owner: Any, method: str, step: str) -> None:
        real = getattr(owner, method)
        if inspect.iscoroutinefunction(real):

            async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
                result = await real(*args, **kwargs)
                steps.append((step, _marked(instance)))
                return result

            monkeypatch.setattr(owner, method, wrapped_async)
        else:

            def wrapped(*args: Any, **kwargs: Any) -> Any:
                result = real(*args, **kwargs)
                steps.append((step, _marked(instance)))
                return result

            monkeypatch.setattr(owner, method, wrapped)

    record(Session, "_stop_private", "sessions")
    record(OneForOne, "stop", "connections")
    record(RouterActor, "run", "router")
    record(StoreActor, "aclose", "store written")
    record(Folding, "stop", "folder stopped")
    record(AuditJournal, "aclose", "journal folded")
    record(Store, "close", "store closed")
    record(InstanceLock, "release", "lock released")
    config = Config(
        servers=(_mini("shared", start=Start.EAGER), _mini("private", scope=Scope.SESSION)),
        tool_search=ToolSearchSettings(enabled=False),
    )
    with trio.fail_after(30):
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            instance = sup.instance_id
            turn = await session.begin_turn()
            assert (await turn.call("shared_echo", {"text": "x"})).ok
            assert (await turn.call("private_echo", {"text": "y"})).ok
            assert _marked(instance) == {"shared", "private", "audit-folder"}
    assert steps == [
        ("sessions", {"shared", "audit-folder"}),
        ("connections", {"audit-folder"}),
        ("router", {"audit-folder"}),
        ("store written", {"audit-folder"}),
        ("folder stopped", set()),
        ("journal folded", set()),
        ("store closed", set()),
        ("lock released", set()),
    ]
    assert sup.servers()["shared"].state is State.STOPPED  # the router folded it before it ended


async def test_an_error_of_the_block_comes_out_in_one_group(tmp_path: Path) -> None:
    error = ValueError("the host's")
    config = Config(servers=(_mini("m", start=Start.EAGER),))
    with trio.fail_after(30), pytest.RaisesGroup(pytest.RaisesExc(ValueError)) as caught:
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            instance = sup.instance_id
            await sup.router.cell.wait_until(lambda c: c.servers["m"].state is State.STEADY)
            raise error
    assert caught.value.exceptions == (error,)  # one group, as from one nursery
    assert not _marked(instance)


async def test_a_part_that_fails_stops_the_supervisor_and_its_error_comes_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in the router (here: it fails on a server's first tool list) is not an
    expected shutdown error: it comes out, after every server is torn down and the
    lock released."""
    real = RouterActor._apply

    def failing(self: RouterActor, message: Any) -> bool:
        if isinstance(message, ServerListed):
            raise RuntimeError("router bug")
        return real(self, message)

    monkeypatch.setattr(RouterActor, "_apply", failing)
    config = Config(servers=(_mini("m", start=Start.EAGER),))
    with trio.fail_after(30), pytest.RaisesGroup(pytest.RaisesExc(RuntimeError, match="router bug")):
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            instance = sup.instance_id
            await trio.sleep_forever()  # cancelled when the router fails
    assert not _marked(instance)
    assert not instance_is_live(tmp_path, instance)
