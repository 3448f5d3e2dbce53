"""The ``console`` section: ``trace_url``, an http(s) URL template with ``{trace_id}``,
or nothing; anything else is one config error naming ``$.console.trace_url`` and the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from supervisor.settings.console import ConsoleSettings
from supervisor.settings.loader import ConfigError, load_config

JAEGER = "http://127.0.0.1:16686/trace/{trace_id}"


def load(tmp_path: Path, console: Any, environ: dict[str, str] | None = None) -> ConsoleSettings:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"servers": {}, "console": console}))
    return load_config(path, environ=environ or {}).console


def test_a_trace_url_template_is_read_and_fills_in_a_quoted_trace_id(tmp_path: Path) -> None:
    assert load(tmp_path, {"trace_url": JAEGER}).trace_url == JAEGER
    assert load(tmp_path, {}) == load(tmp_path, {"trace_url": None}) == ConsoleSettings()
    from_env = load(tmp_path, {"trace_url": "${env:TRACES}/{trace_id}"}, {"TRACES": "https://t.example/x"})
    assert from_env.trace_link("4bf92f3577b34da6a3ce929d0e0e4736") == (
        "https://t.example/x/4bf92f3577b34da6a3ce929d0e0e4736"
    )
    assert (
        ConsoleSettings(JAEGER).trace_link('a/b?c="d"') == "http://127.0.0.1:16686/trace/a%2Fb%3Fc%3D%22d%22"
    )
    assert ConsoleSettings(JAEGER).trace_link(None) is None
    assert ConsoleSettings().trace_link("4bf92f3577b34da6a3ce929d0e0e4736") is None


@pytest.mark.parametrize(
    ("console", "problem"),
    [
        ({"trace_url": "http://127.0.0.1:16686/trace/"}, "has no {trace_id} for the trace id to go into"),
        ({"trace_url": "javascript:alert('{trace_id}')"}, "expected an http:// or https:// URL"),
        ({"trace_url": "ftp://traces.example/{trace_id}"}, "expected an http:// or https:// URL"),
        ({"trace_url": "/trace/{trace_id}"}, "expected an http:// or https:// URL"),
        ({"trace_url": "http://[::1/{trace_id}"}, "not a URL"),
        ({"trace_url": 7}, "expected a URL template, like"),
    ],
)
def test_a_trace_url_that_cannot_be_a_link_is_refused_saying_how(
    tmp_path: Path, console: Any, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, console)
    error = caught.value
    assert error.json_path == "$.console.trace_url" and problem in error.problem, error
    assert "http://127.0.0.1:16686/trace/{trace_id}" in error.problem  # the example of a fix


def test_an_unknown_console_key_or_a_non_object_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, {"trace_uri": JAEGER})
    assert caught.value.json_path == "$.console" and "trace_uri" in caught.value.problem
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, JAEGER)
    assert caught.value.json_path == "$.console" and "trace_url" in caught.value.problem


def test_allowed_origins_are_read_lower_case_and_a_bad_one_is_named(tmp_path: Path) -> None:
    read = load(tmp_path, {"allowed_origins": ["https://Console.Example", "http://127.0.0.1:8100"]})
    assert read.allowed_origins == ("https://console.example", "http://127.0.0.1:8100")
    for bad in (["https://console.example/ui"], ["*"], "https://console.example", [7]):
        with pytest.raises(ConfigError) as caught:
            load(tmp_path, {"allowed_origins": bad})
        assert "$.console.allowed_origins" in str(caught.value), bad
