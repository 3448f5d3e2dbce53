"""The conformance suite's client entry point (supervisor/cli/conformance_client.py), run as
the suite runs it (a subprocess, URL last, scenario in the environment) against our
Hypercorn fault server. The suite itself runs from .ci/conformance (needs Node 22)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
import trio

from actors.protocol.messages import Tool
from actors.router.catalog import make_entry
from supervisor.cli.conformance_client import (
    CLIENT_METADATA_URL,
    callable_tools,
    conformance_config,
    example_arguments,
    main,
    oauth_settings,
)
from tests.support.paths import REPO, SERVERS

sys.path.insert(0, str(SERVERS))
from http_fault_server import FaultOptions, FaultServer, serve_fault_server
from oauth_server import OAuthOptions, OAuthServer, serve_oauth_server

ROOT = REPO


async def run_client(*args: str, scenario: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "MCP_CONFORMANCE_SCENARIO": scenario}
    with trio.fail_after(20):
        return await trio.run_process(
            [sys.executable, "-m", "supervisor.cli.conformance_client", *args],
            env=env,
            cwd=ROOT,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_initialize_list_and_call_against_our_server(mode: str) -> None:
    async with trio.open_nursery() as nursery:
        server: FaultServer = await nursery.start(serve_fault_server, FaultOptions(mode=mode))
        done = await run_client("--call", "echo", server.url, scenario="tools_call")
        nursery.cancel_scope.cancel()
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, (out, err)
    assert "tools_call: completed" in out
    assert "called echo(" in out
    assert [s.rpc for s in server.seen if s.rpc in ("initialize", "tools/list", "tools/call")] == [
        "initialize",
        "tools/list",
        "tools/call",
    ]


async def test_a_failed_connect_exits_1_with_a_reason() -> None:
    async with trio.open_nursery() as nursery:
        server: FaultServer = await nursery.start(
            serve_fault_server, FaultOptions(fail_status=500, fail_after=0)
        )
        done = await run_client("--call", "nope", server.url, scenario="tools_call")
        nursery.cancel_scope.cancel()
    err = done.stderr.decode().strip().splitlines()
    assert done.returncode == 1, err
    assert err[-1].startswith("tools_call: connect failed"), err


async def test_auth_scenarios_authorize_through_the_redirect_and_call() -> None:
    async with trio.open_nursery() as nursery:
        server: OAuthServer = await nursery.start(serve_oauth_server, OAuthOptions())
        done = await run_client("--call", "echo", server.mcp_url, scenario="auth/metadata-default")
        nursery.cancel_scope.cancel()
    assert done.returncode == 0, done.stderr.decode()
    assert "auth/metadata-default: completed" in done.stdout.decode()
    assert [r["grant_type"] for r in server.token_requests] == ["authorization_code"]
    assert server.authorize_requests[0]["code_challenge_method"] == "S256"


def test_oauth_settings_come_from_the_scenario_context() -> None:
    assert oauth_settings("tools_call", {"client_id": "x"}) is None
    assert oauth_settings("auth/metadata-default", {}) == {"client_metadata_url": CLIENT_METADATA_URL}
    context = {"client_id": "c", "client_secret": "s", "private_key_pem": "PEM", "signing_algorithm": "ES256"}
    assert oauth_settings("auth/client-credentials-jwt", context) == {
        "client_metadata_url": CLIENT_METADATA_URL,
        "client_id": "c",
        "client_secret": "s",
        "private_key": "PEM",
        "signing_algorithm": "ES256",
        "flow": "client_credentials",
    }


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "required: url" in capsys.readouterr().err
    assert main(["not-a-url"]) == 2
    assert "not an http(s) URL" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
            {"a": 1, "b": 1},
        ),
        (
            {
                "type": "object",
                "properties": {"s": {"type": "string", "default": "x"}, "o": {}},
                "required": ["s"],
            },
            {"s": "x"},
        ),
        (
            {"type": "object", "properties": {"e": {"enum": ["p", "q"]}}, "required": ["e", "gone"]},
            {"e": "p"},
        ),
        ({"type": "object"}, {}),
    ],
)
def test_example_arguments_fill_required_properties(schema: dict[str, Any], expected: dict[str, Any]) -> None:
    assert example_arguments(schema) == expected


def test_a_tool_listed_with_a_schema_problem_is_skipped_not_called() -> None:
    """json-schema-ref-no-deref (0.2.0): a ``$ref`` to a network URI is never fetched, so
    the tool is listed with a problem and every call to it is refused; the client must
    not count that refusal as the scenario failing."""
    spec = conformance_config("http://127.0.0.1:1/mcp").servers[0]
    network_ref = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"userId": {"type": "string"}},
        "properties": {"id": {"$ref": "#/$defs/userId"}, "profile": {"$ref": "http://127.0.0.1:1/p.json"}},
        "required": ["id"],
    }
    same_document = {**network_ref, "properties": {"id": {"$ref": "#/$defs/userId"}}}
    lookup = make_entry("conformance_lookup_user", spec, Tool("lookup_user", "", network_ref), 2000)
    local = make_entry("conformance_local", spec, Tool("local", "", same_document), 2000)
    keep, skipped = callable_tools([lookup, local])
    assert keep == [local]
    assert [(entry.name, "http://127.0.0.1:1/p.json" in problem) for entry, problem in skipped] == [
        ("lookup_user", True)
    ]
