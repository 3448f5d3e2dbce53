"""A remote server's ``credentials``: ``shared`` by default, ``per_user`` only where a
person can sign in (a remote server with ``oauth``, one connection per person); anything
else a ``config error:`` naming ``$.servers.<name>.credentials`` and the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.spec import Credentials
from supervisor.settings.loader import ConfigError, load_config

URL = "https://gh.example/mcp"


def load(tmp_path: Path, server: dict[str, Any]) -> Credentials:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"servers": {"gh": server}}), encoding="utf-8")
    return load_config(path, environ={}).servers[0].credentials


def test_shared_by_default_and_per_user_on_a_remote_oauth_server(tmp_path: Path) -> None:
    assert load(tmp_path, {"url": URL, "oauth": {}}) is Credentials.SHARED
    assert load(tmp_path, {"url": URL, "oauth": {}, "credentials": "shared"}) is Credentials.SHARED
    assert load(tmp_path, {"url": URL, "oauth": {}, "credentials": "per_user"}) is Credentials.PER_USER


@pytest.mark.parametrize(
    ("server", "says"),
    [
        ({"url": URL, "oauth": {}, "credentials": "per_usr"}, "expected 'shared' or 'per_user'"),
        ({"url": URL, "credentials": "per_user"}, 'needs a remote server with an "oauth" block'),
        ({"command": "gh-mcp", "credentials": "per_user"}, 'needs a remote server with an "oauth" block'),
        ({"url": URL, "oauth": {}, "scope": "session", "credentials": "per_user"}, "per person"),
        ({"url": URL, "oauth": {}, "bridge": True, "credentials": "per_user"}, "per person"),
    ],
)
def test_what_cannot_be_per_user_is_refused_naming_the_key_and_the_fix(
    tmp_path: Path, server: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, server)
    message = str(caught.value)
    assert "$.servers.gh.credentials" in message and says in message
    assert "remove" in message or "did you mean 'per_user'" in message


@pytest.mark.parametrize("credentials", [{}, {"credentials": "shared"}])
def test_token_exchange_on_a_shared_server_is_refused(tmp_path: Path, credentials: dict[str, str]) -> None:
    """Token exchange sends a person's own token: a shared server has no person."""
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, {"url": URL, "oauth": {"token_exchange": True}, **credentials})
    message = str(caught.value)
    assert "$.servers.gh.oauth.token_exchange" in message and 'needs "credentials": "per_user"' in message
    assert load(tmp_path, {"url": URL, "oauth": {"token_exchange": True}, "credentials": "per_user"}) is (
        Credentials.PER_USER
    )
