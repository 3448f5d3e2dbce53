"""The ``secrets_at_rest`` section: keys from ``${file:}`` and ``${env:}``, in order, and a
bad key a ``config error`` naming the entry and how to make one, never showing the key."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest

from supervisor.settings.secrets_at_rest import MAKE_KEY, decode_key
from tests.settings.test_config_loader import fail, load
from tests.support.paths import REPO


def test_keys_come_from_a_file_and_the_environment_first_one_first(tmp_path: Path) -> None:
    new, old = os.urandom(32), os.urandom(32)
    (tmp_path / "new.key").write_text(base64.b64encode(new).decode() + "\n")
    doc = {"servers": {}, "secrets_at_rest": {"keys": ["${file:new.key}", "${env:OLD_KEY}"]}}
    config = load(tmp_path, doc, {"OLD_KEY": base64.b64encode(old).decode()})
    assert config.secrets_at_rest.keys == (new, old)
    assert base64.b64encode(new).decode() not in repr(config)  # a key is never shown


def test_no_section_means_no_configured_key(tmp_path: Path) -> None:
    assert load(tmp_path, {"servers": {}}).secrets_at_rest.keys == ()


@pytest.mark.parametrize(
    ("section", "where", "problem"),
    [
        ({"keys": ["not base64!"]}, "$.secrets_at_rest.keys[0]", "not a key: it is not base64; "),
        (
            {"keys": [base64.b64encode(b"short").decode()]},
            "$.secrets_at_rest.keys[0]",
            "not a key: it is 5 bytes",
        ),
        ({"keys": []}, "$.secrets_at_rest.keys", "the list is empty"),
        ({"keys": "abc"}, "$.secrets_at_rest.keys", "expected a list of keys"),
        ({"keys": [1]}, "$.secrets_at_rest.keys[0]", "expected a key in base64"),
        ({"key": ["x"]}, "$.secrets_at_rest", "unknown key 'key'"),
        ([], "$.secrets_at_rest", "expected an object"),
    ],
)
def test_a_bad_entry_is_a_config_error_naming_it(
    tmp_path: Path, section: object, where: str, problem: str
) -> None:
    error = fail(tmp_path, {"servers": {}, "secrets_at_rest": section})
    assert error.json_path == where
    assert error.problem.startswith(problem), error.problem
    if "not a key" in problem:
        assert MAKE_KEY in error.problem  # how to make one
        assert "not base64!" not in error.problem  # never the value itself


def test_a_missing_key_file_is_a_config_error(tmp_path: Path) -> None:
    error = fail(tmp_path, {"servers": {}, "secrets_at_rest": {"keys": ["${file:gone.key}"]}})
    assert error.json_path == "$.secrets_at_rest.keys[0]" and "gone.key" in error.problem


def test_the_documented_command_makes_a_key(tmp_path: Path) -> None:
    assert MAKE_KEY in (REPO / "docs" / "identity.md").read_text()
    made = subprocess.run(MAKE_KEY, shell=True, capture_output=True, text=True, check=True, timeout=30)
    assert len(decode_key(made.stdout)) == 32
