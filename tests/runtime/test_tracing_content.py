"""What a traced call's span shows besides its metadata (issue 30): nothing of its
content or caller by default; with the config's ``tracing`` keys, the arguments, the
result and the tenant, masked as log lines are and cut to the server's bound."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from actors.router.envelope import TRUNCATION_MARKER
from supervisor import Supervisor
from supervisor.calls.span_content import ARGUMENTS, PERSON, RESULT, SESSION, TENANT, TOO_DEEP, span_text
from supervisor.settings.loader import load_config
from supervisor.settings.model import Config, TracingSettings
from tests.runtime.test_tracing import MINI
from tests.support.traces import Traces

SECRET = "s3cr3t-Value-4711"
QUOTED = 'pa"ss\\word-0042'  # JSON escapes it: masked before it is quoted, or not at all
CONTENT = (ARGUMENTS, RESULT, TENANT, SESSION, PERSON)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def configured(tmp_path: Path, tracing: dict[str, bool], max_output_bytes: int = 16_384) -> Config:
    """A config file as an operator writes it: the server's secrets from the environment."""
    doc: dict[str, Any] = {
        "servers": {
            "mini": {
                "command": [sys.executable, MINI],
                "env": {"MINI_TOKEN": "${env:MINI_TOKEN}", "MINI_PASSWORD": "${env:MINI_PASSWORD}"},
                "trusted": True,
                "max_output_bytes": max_output_bytes,
            }
        },
        "tracing": tracing,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    return load_config(path, environ={"MINI_TOKEN": SECRET, "MINI_PASSWORD": QUOTED})


def shown(traces: Traces) -> dict[str, Any]:
    """The content attributes on the spans, by name (several spans may not carry one)."""
    found: dict[str, Any] = {}
    for span in traces.spans():
        for key in CONTENT:
            if key in (span.attributes or {}):
                assert key not in found, f"{key} on more than one span"
                found[key] = (span.name, (span.attributes or {})[key])
    return found


async def test_by_default_a_span_shows_no_arguments_results_or_tenant(tmp_path: Path, traces: Traces) -> None:
    config = configured(tmp_path, {})
    async with (
        Supervisor.open(config, state_dir=tmp_path) as sup,
        sup.session(tenant="acme", person="ada") as session,
    ):
        turn = await session.begin_turn()
        assert (await turn.call("mini_echo", {"text": f"hello {SECRET}"})).ok
    assert shown(traces) == {}
    assert not any(
        word in str(span.attributes) for span in traces.spans() for word in ("acme", "ada", "hello")
    )
    assert traces.named("mcp_supervisor tools/call mini_echo")  # traced all the same


async def test_opted_in_the_call_span_shows_them_masked_and_cut(tmp_path: Path, traces: Traces) -> None:
    everything = {"arguments": True, "results": True, "identity": True}
    config = configured(tmp_path, everything, max_output_bytes=200)
    text = f"{SECRET} and {QUOTED} then " + "x" * 500
    async with (
        Supervisor.open(config, state_dir=tmp_path) as sup,
        sup.session(tenant="acme", person="ada") as session,
    ):
        turn = await session.begin_turn()
        envelope = await turn.call("mini_echo", {"text": text})
        assert envelope.ok and envelope.truncated
    found = shown(traces)
    ours = "mcp_supervisor tools/call mini_echo"
    assert {name for name, _ in found.values()} == {ours}  # all on the call's span
    assert found[TENANT][1] == "acme" and found[SESSION][1] == session.id
    assert found[PERSON][1] == "ada"  # who, only because identity is on
    for key in (ARGUMENTS, RESULT):
        value = found[key][1]
        assert SECRET not in value and 'pa\\"ss' not in value and "word-0042" not in value
        assert value.startswith('{"text":"*** and *** then xxx' if key == ARGUMENTS else '{"ok":true,')
        assert len(value.encode()) <= 200 and value.endswith(TRUNCATION_MARKER)
    assert '"text":"*** and *** then xxx' in found[RESULT][1]


async def test_results_alone_and_a_refused_call_too(tmp_path: Path, traces: Traces) -> None:
    """Each key opts in to its own part; a call refused before any server still shows
    what it was asked and answered (the default bound: no server to take one from)."""
    config = configured(tmp_path, {"results": True})
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        await turn.call("mini_echo", {"text": "kept"})
        unknown = await turn.call("no_such_tool", {"password": "hunter22"})
        assert unknown.error is not None and unknown.error.code == "unknown_tool"
    attributes = [dict(span.attributes or {}) for span in traces.spans()]
    results = [a[RESULT] for a in attributes if RESULT in a]
    assert len(results) == 2 and '"text":"kept"' in results[0] and '"code":"unknown_tool"' in results[1]
    assert not any(key in a for a in attributes for key in (ARGUMENTS, TENANT, SESSION))


async def test_a_reload_turns_it_on_for_the_calls_after_it(tmp_path: Path, traces: Traces) -> None:
    config = configured(tmp_path, {})
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        await turn.call("mini_echo", {"text": "before"})
        plan = await sup.reload(attrs.evolve(config, tracing=TracingSettings(arguments=True)))
        assert plan.settings == ("tracing",)
        await turn.call("mini_echo", {"text": "after"})
    arguments = [dict(span.attributes or {}).get(ARGUMENTS) for span in traces.spans()]
    assert [value for value in arguments if value is not None] == ['{"text":"after"}']


def test_span_text_takes_anything_a_caller_passes() -> None:
    assert span_text({"api_key": "abc123", "n": 1, "x": None}, 1000) == '{"api_key":"***","n":1,"x":null}'
    assert (
        span_text({"big": 1 << 70, "lone": "\ud800"}, 1000)
        == '{"big": 1180591620717411303424, "lone": "\\ud800"}'
    )
    deep: Any = []
    for _ in range(100):
        deep = [deep]
    assert span_text(deep, 1000) == TOO_DEEP
    assert span_text({"b": b"raw", "t": (1, 2)}, 1000) == '{"b":"b\'raw\'","t":[1,2]}'
    assert span_text({"text": "é" * 100}, 40).encode().__len__() <= 40
