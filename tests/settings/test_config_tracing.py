"""The ``tracing`` config section: every opt-in off by default, each a boolean, and a
bad entry a located ``config error``."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.settings.model import TracingSettings
from tests.settings.test_config_loader import fail, load


def test_everything_is_off_without_a_section(tmp_path: Path) -> None:
    assert load(tmp_path, {"servers": {}}).tracing == TracingSettings(False, False, False)
    assert load(tmp_path, {"tracing": {}}).tracing == TracingSettings()


def test_each_key_opts_in_alone(tmp_path: Path) -> None:
    assert load(tmp_path, {"tracing": {"results": True}}).tracing == TracingSettings(results=True)
    everything = {"arguments": True, "results": True, "identity": True}
    assert load(tmp_path, {"tracing": everything}).tracing == TracingSettings(True, True, True)


@pytest.mark.parametrize(
    ("tracing", "where", "problem"),
    [
        ([], "$.tracing", "expected an object"),
        ({"arguments": "yes"}, "$.tracing.arguments", 'expected true or false, got "yes"'),
        ({"identity": 1}, "$.tracing.identity", "expected true or false, got 1"),
        ({"result": True}, "$.tracing", "unknown key 'result' (did you mean 'results'?)"),
        (
            {"tenant": True},
            "$.tracing",
            "unknown key 'tenant'; allowed keys are arguments, identity, results",
        ),
    ],
)
def test_a_bad_entry_is_a_config_error_naming_it(
    tmp_path: Path, tracing: object, where: str, problem: str
) -> None:
    error = fail(tmp_path, {"servers": {}, "tracing": tracing})
    assert error.json_path == where
    assert error.problem.startswith(problem), error.problem


def test_a_near_miss_of_the_section_is_an_error(tmp_path: Path) -> None:
    assert "did you mean 'tracing'?" in fail(tmp_path, {"Tracing": {"results": True}}).problem
