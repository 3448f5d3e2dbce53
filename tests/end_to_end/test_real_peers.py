"""Interop with real third-party MCP servers, through the embedding API.

- ``mcp-server-time`` from PyPI (built on the official SDK),
- a server of ours built on the official ``mcp`` Python SDK (tests/servers/sdk_server.py),
- ``@modelcontextprotocol/server-everything`` from npm (installed by .ci/setup).

Each skips, saying why, only when its package truly cannot be had here.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
import trio

from actors.protocol.session import ProgressReceived
from actors.spec import ServerSpec
from supervisor import Supervisor
from supervisor.settings.model import Config
from tests.support.paths import REPO

ROOT = REPO
EVERYTHING = ROOT / ".venv" / "node" / "node_modules" / ".bin" / "mcp-server-everything"


def needs_module(name: str) -> None:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"python package for {name} is not installed (pip install -e '.[dev]' brings it)")


async def test_mcp_server_time_through_the_embedding_api(tmp_path: Path) -> None:
    needs_module("mcp_server_time")
    spec = ServerSpec(
        name="time", command=(sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC")
    )
    async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as session:
        with trio.fail_after(20):
            turn = await session.begin_turn()
        assert {"time_get_current_time", "time_convert_time"} <= {t.id for t in turn.tools}
        now = await turn.call("time_get_current_time", {"timezone": "UTC"})
        assert now.ok, now
        assert '"timezone": "UTC"' in now.text or "UTC" in now.text
        converted = await turn.call(
            "time_convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
        assert converted.ok and "Asia/Tokyo" in converted.text
        bad = await turn.call("time_get_current_time", {"timezone": "Not/AZone"})
        assert not bad.ok and bad.error is not None and bad.error.code in ("tool_error", "server_error")


async def test_official_sdk_server_with_progress(tmp_path: Path) -> None:
    needs_module("mcp")
    spec = ServerSpec(name="sdk", command=(sys.executable, str(ROOT / "tests" / "servers" / "sdk_server.py")))
    async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as session:
        with trio.fail_after(20):
            turn = await session.begin_turn()
        assert {"sdk_add", "sdk_shout", "sdk_count"} <= {t.id for t in turn.tools}
        added = await turn.call("sdk_add", {"a": 2, "b": 40})
        assert added.ok and added.text == "42"
        assert added.structured == {"result": 42}
        progress_send, progress_receive = trio.open_memory_channel[ProgressReceived](100)
        counted = await turn.call("sdk_count", {"steps": 3}, progress=progress_send)
        assert counted.ok and counted.text == "counted to 3"
        steps = []
        while True:
            try:
                steps.append(progress_receive.receive_nowait())
            except trio.WouldBlock:
                break
        assert [(p.progress, p.total, p.message) for p in steps] == [
            (1, 3, "step 1"),
            (2, 3, "step 2"),
            (3, 3, "step 3"),
        ]


async def test_server_everything_over_stdio(tmp_path: Path) -> None:
    if not EVERYTHING.exists():
        reason = "npm is not on PATH" if shutil.which("npm") is None else ".ci/setup could not install it"
        pytest.skip(f"@modelcontextprotocol/server-everything is not installed: {reason}")
    spec = ServerSpec(name="everything", command=(str(EVERYTHING), "stdio"))
    async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as session:
        with trio.fail_after(20):
            turn = await session.begin_turn()
        ids = {t.id for t in turn.tools}
        assert "everything_echo" in ids
        echoed = await turn.call("everything_echo", {"message": "hello"})
        assert echoed.ok and "hello" in echoed.text
        # the burst of list_changed right after initialize did not disturb anything
        assert sup.servers()["everything"].available
        long_running = "everything_trigger-long-running-operation"
        if long_running in ids:
            progress_send, progress_receive = trio.open_memory_channel[ProgressReceived](100)
            result = await turn.call(long_running, {"duration": 1, "steps": 2}, progress=progress_send)
            assert result.ok, result
            assert progress_receive.receive_nowait().total == 2
