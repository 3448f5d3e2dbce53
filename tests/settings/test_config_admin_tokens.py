"""``admin.tokens`` in the config: what a token must be, the role it grants, and errors
that never show it.

``{"<token>": "alice"}`` is the tenant ``alice`` in the ``tenant`` role;
``{"<token>": {"tenant": "ops", "role": "operator"}}`` names the role (the tenant
defaults to ``default``).

A token is a credential, so every error names the entry by its number and tenant
(``token #2 (tenant "bob")``), never by its value, in the exact
``config error: <file>: $.admin.tokens: <problem>`` form that ``check`` prints.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supervisor.cli import main as cli
from supervisor.settings.loader import MIN_TOKEN_LENGTH, ConfigError, load_config
from supervisor.settings.model import AdminSettings, Role, TokenGrant

GOOD = "good-token-0123456789"


def _load(tmp_path: Path, tokens: dict[str, object], environ: dict[str, str] | None = None) -> object:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"admin": {"tokens": tokens}}))
    return load_config(path, environ=environ or {})


def _error(tmp_path: Path, tokens: dict[str, object], environ: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, tokens, environ)
    error = caught.value
    assert str(error) == f"config error: {tmp_path / 'config.json'}: $.admin.tokens: {error.problem}"
    return error


@pytest.mark.parametrize("length", [1, 8, MIN_TOKEN_LENGTH - 1])
def test_a_short_token_is_refused_by_its_number_and_tenant(tmp_path: Path, length: int) -> None:
    short = "~" * length
    error = _error(tmp_path, {GOOD: "alice", short: "bob"})
    assert error.problem.startswith(
        f'token #2 (tenant "bob") is too short ({length} of at least 16 characters): '
        "make one with: python3 -c"
    )
    assert "~" not in str(error)


def test_a_short_token_from_the_environment_is_refused_without_showing_it(tmp_path: Path) -> None:
    error = _error(tmp_path, {"${env:ADMIN}": "ops"}, {"ADMIN": "hunter2"})
    assert "hunter2" not in str(error) and "is too short (7 of at least 16 characters)" in error.problem


def test_sixteen_characters_are_enough(tmp_path: Path) -> None:
    config = _load(tmp_path, {"x" * MIN_TOKEN_LENGTH: "alice"})
    assert list(config.admin.tokens) == ["x" * MIN_TOKEN_LENGTH]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "token",
    [
        "with a space-0123456789",
        "nul-\x00-inside-0123456789",
        "tab\tinside-0123456789",
        "non-ascii-é-0123456789",
        "bell-\x07-0123456789",
    ],
    ids=["space", "nul", "tab", "non-ascii", "control"],
)
def test_a_token_no_header_can_carry_is_refused(tmp_path: Path, token: str) -> None:
    error = _error(tmp_path, {GOOD: "alice", token: "bob"})
    assert error.problem.startswith('token #2 (tenant "bob") has a character a bearer token cannot carry')
    assert token not in str(error)


def test_check_prints_the_one_line_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"admin": {"tokens": {"short-secret": "ops"}}}))
    assert cli.main(["check", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f'config error: {path}: $.admin.tokens: token #1 (tenant "ops") is too short '
        "(12 of at least 16 characters): make one with: "
        "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
    )
    assert "short-secret" not in err


def test_a_token_may_name_a_tenant_and_a_role(tmp_path: Path) -> None:
    tokens: dict[str, object] = {
        "alice-token-0123456789": "alice",
        "ops-token-0123456789": {"tenant": "ops", "role": "operator"},
        "peer-token-0123456789": {"role": "peer"},
        "bob-token-0123456789": {"tenant": "${env:BOB}"},
    }
    config = _load(tmp_path, tokens, {"BOB": "bob"})
    assert dict(config.admin.tokens) == {  # type: ignore[attr-defined]
        "alice-token-0123456789": TokenGrant("alice", Role.TENANT),
        "ops-token-0123456789": TokenGrant("ops", Role.OPERATOR),
        "peer-token-0123456789": TokenGrant("default", Role.PEER),
        "bob-token-0123456789": TokenGrant("bob", Role.TENANT),
    }


def test_a_bare_tenant_name_in_a_hand_built_config_means_the_tenant_role() -> None:
    settings = AdminSettings(tokens={GOOD: "alice"})
    assert settings.tokens == {GOOD: TokenGrant("alice", Role.TENANT)}


@pytest.mark.parametrize(
    ("grant", "problem"),
    [
        ({"tenant": "ops", "role": "admin"},
         'token #2 (tenant "ops") has "role": "admin"; expected \'operator\', \'tenant\', \'peer\''),
        ({"tenant": "ops", "role": 1},
         'token #2 (tenant "ops") has "role": 1; expected \'operator\', \'tenant\', \'peer\''),
        ({"tenant": "", "role": "operator"}, 'token #2 has "tenant": ""; expected a non-empty string'),
        ({"tenant": ["a"]}, 'token #2 has "tenant": ["a"]; expected a non-empty string'),
        ({"tenant": "ops", "rolle": "operator"},
         "token #2 has an unknown key 'rolle'; allowed keys are role, tenant"),
        (["ops", "operator"],
         'token #2 maps to ["ops", "operator"]; expected a tenant name (a non-empty string such as '
         '"default") or {"tenant": "<name>", "role": "operator" | "tenant" | "peer"}'),
        ("  ", 'token #2 maps to "  "; expected a tenant name (a non-empty string such as '
         '"default") or {"tenant": "<name>", "role": "operator" | "tenant" | "peer"}'),
    ],
)  # fmt: skip
def test_a_bad_grant_names_the_entry_not_the_token(tmp_path: Path, grant: object, problem: str) -> None:
    secret = "ops-token-0123456789"
    error = _error(tmp_path, {GOOD: "alice", secret: grant})
    assert error.problem == problem
    assert secret not in str(error)
