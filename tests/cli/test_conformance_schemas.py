"""The conformance client in the suite's ``json-schema-2020-12-preservation`` scenario
(0.2.0): it must echo the focal tool's inputSchema as ``turn.listing()`` hands it on,
and call the focal tool with arguments its schema accepts.

The scenario's two tools (the focal schema is ``schema_fixtures.SUITE_FOCAL``) are
served by our stdio mini_server.py (the client's ``_drive`` works on any supervised
server named ``conformance``); .ci/conformance runs the suite itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio

from actors.router.schema_compiler import compile_schema
from actors.router.validation import validate_arguments
from supervisor.cli.conformance_client import KNOWN_ARGUMENTS, SERVER, _drive
from supervisor.service import Supervisor
from tests.support.admin import config_of, mini_spec
from tests.support.schema_fixtures import SUITE_FOCAL, as_text

FOCAL = "json_schema_2020_12_tool"
FOCAL_SCHEMA = SUITE_FOCAL
SCENARIO_TOOLS = [
    {"name": FOCAL, "description": "Tool with JSON Schema 2020-12 features", "inputSchema": FOCAL_SCHEMA},
    {
        "name": "json_schema_echo",
        "description": "Echoes back an arbitrary JSON Schema object.",
        "inputSchema": {
            "type": "object",
            "properties": {"schema": {"type": "object"}},
            "required": ["schema"],
        },
    },
]


def test_the_focal_tools_arguments_fit_its_schema() -> None:
    check = compile_schema(FOCAL_SCHEMA)
    assert check.problem is None
    assert validate_arguments(FOCAL, check, KNOWN_ARGUMENTS[FOCAL]) is None
    # what example_arguments would make up ({}) is refused: the anyOf/else need an email
    assert validate_arguments(FOCAL, check, {}) is not None


async def test_the_echo_carries_the_listed_schema_unchanged(tmp_path: Path) -> None:
    tools_file, log = tmp_path / "tools.json", tmp_path / "calls.log"
    tools_file.write_text(json.dumps(SCENARIO_TOOLS), encoding="utf-8")
    spec = mini_spec(SERVER, "--tools-file", str(tools_file), "--calls-log", str(log))
    done: list[str] = []
    state = tmp_path / "state"
    async with Supervisor.open(config_of(spec), state_dir=state) as sup, sup.session() as session:
        with trio.fail_after(15):
            await _drive(sup, session, done, [FOCAL, "json_schema_echo"])
    calls = {c["name"]: c["arguments"] for c in map(json.loads, log.read_text().splitlines())}
    assert calls[FOCAL] == KNOWN_ARGUMENTS[FOCAL]
    assert as_text(calls["json_schema_echo"]) == as_text({"schema": FOCAL_SCHEMA})
