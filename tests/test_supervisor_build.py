"""How a ``Supervisor`` is put together: what it is given reaches the parts that use it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from actors.auth.authorizers import FollowRedirectAuthorizer
from supervisor import Supervisor, service
from supervisor.settings.model import Config

ROOT = Path(__file__).resolve().parent.parent


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
