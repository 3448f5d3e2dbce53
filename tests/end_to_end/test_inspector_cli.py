"""The TypeScript SDK's client, through the MCP Inspector's CLI mode
(``@modelcontextprotocol/inspector`` 1.0.3, npm, installed by .ci/setup into
.venv/node), against an MCP server of ours over stdio, and against the gateway's
``/mcp`` (Streamable HTTP, with a bearer token) fronting it. It skips, saying why, only
when the package truly cannot be had here.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest
import trio

from actors.spec import ServerSpec, Start
from supervisor.settings.model import ToolSearchSettings
from tests.support.admin import ALICE, TOKENS, admin_running, config_of
from tests.support.paths import REPO

ROOT = REPO
NODE_MODULES = ROOT / ".venv" / "node" / "node_modules"
INSPECTOR = NODE_MODULES / ".bin" / "mcp-inspector"
FIXTURE = ROOT / "tests" / "servers" / "everything_server.py"


def inspector() -> Path:
    if not INSPECTOR.exists():
        reason = "npm is not on PATH" if shutil.which("npm") is None else ".ci/setup could not install it"
        pytest.skip(f"@modelcontextprotocol/inspector is not installed: {reason}")
    return INSPECTOR


async def inspect(*args: str, target: Sequence[str] = (sys.executable, str(FIXTURE))) -> dict[str, object]:
    """One CLI call against ``target`` (by default the fixture over stdio); its JSON answer."""
    command = [str(inspector()), "--cli", *target, *args]
    with trio.fail_after(30):
        done = await trio.run_process(command, capture_stdout=True)
    answer = json.loads(done.stdout)
    assert isinstance(answer, dict)
    return answer


async def test_the_inspector_cli_lists_and_calls_over_stdio() -> None:
    listed = await inspect("--method", "tools/list")
    names = {tool["name"] for tool in listed["tools"]}  # type: ignore[attr-defined]
    assert {"test_simple_text", "test_error_handling"} <= names
    called = await inspect("--method", "tools/call", "--tool-name", "test_simple_text")
    assert called["content"] == [{"type": "text", "text": "This is a simple text response for testing."}]


async def test_the_inspector_cli_lists_and_calls_through_the_gateway(tmp_path: Path) -> None:
    inspector()
    fixture = ServerSpec(
        name="everything", command=(sys.executable, str(FIXTURE)), start=Start.EAGER, trusted=True
    )
    # The fixture has more tools than the search threshold: list them all.
    config = attrs.evolve(config_of(fixture, tokens=TOKENS), tool_search=ToolSearchSettings(enabled=False))
    async with admin_running(config, tmp_path) as api:
        target = (f"{api.url}/mcp", "--transport", "http", "--header", f"Authorization: Bearer {ALICE}")
        listed = await inspect("--method", "tools/list", target=target)
        names = {tool["name"] for tool in listed["tools"]}  # type: ignore[attr-defined]
        assert {"everything_test_simple_text", "everything_test_error_handling"} <= names
        called = await inspect(
            "--method", "tools/call", "--tool-name", "everything_test_simple_text", target=target
        )
        assert called["content"] == [{"type": "text", "text": "This is a simple text response for testing."}]
        assert not called.get("isError")
        failed = await inspect(
            "--method", "tools/call", "--tool-name", "everything_test_error_handling", target=target
        )
        assert failed["isError"] is True
