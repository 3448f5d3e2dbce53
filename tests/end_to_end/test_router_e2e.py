"""The router end to end against real servers: search on by default, a search, a call of
a found tool, a denied call, and invalid arguments that never reach the server."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import trio

from actors.spec import ServerSpec
from supervisor import Supervisor, load_config
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")


def calls_in(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [json.loads(line)["name"] for line in log.read_text().splitlines()]


@pytest.mark.skipif(
    importlib.util.find_spec("mcp_server_time") is None, reason="mcp-server-time is not installed"
)
async def test_search_call_deny_and_invalid_arguments(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    config_file = tmp_path / "config.json"
    config_file.write_text(
        json.dumps(
            {
                "servers": {
                    "time": {
                        "command": [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"],
                        "trusted": True,
                    },
                    "many": {"command": [sys.executable, MINI, "--tools", "30", "--calls-log", str(log)]},
                },
                "trust": {
                    "rules": [
                        {"permission": "mcp:many:*", "pattern": "*", "action": "allow"},
                        {"permission": "mcp:many:crash", "pattern": "*", "action": "deny"},
                    ]
                },
            }
        )
    )
    config = load_config(config_file)
    async with Supervisor.open(config, state_dir=tmp_path / "state") as sup, sup.session() as session:
        with trio.fail_after(30):
            turn = await session.begin_turn()
        # 2 + 39 tools > 20: search is on by default; the turn lists only tool_search
        assert turn.search_enabled
        assert [t.id for t in turn.tools] == ["tool_search"]
        found = turn.search("current time in a timezone")
        ids = [m["id"] for m in found["matches"]]
        assert "time_get_current_time" in ids[:3], ids
        now = await turn.call("time_get_current_time", {"timezone": "UTC"})
        assert now.ok, now
        assert "time_get_current_time" in [t.id for t in turn.tools]
        # a tool the turn does not show cannot be called; a search shows it
        hidden = await turn.call("many_add", {"a": 1, "b": 2})
        assert hidden.error is not None and hidden.error.code == "unknown_tool"
        assert "many_crash" in [m["id"] for m in turn.search("exit the server process")["matches"]]
        assert "many_add" in [m["id"] for m in turn.search("add two numbers")["matches"]]
        # a denied call
        denied = await turn.call("many_crash", {})
        assert denied.error is not None and denied.error.code == "denied"
        # invalid arguments never reach the server
        invalid = await turn.call("many_add", {"a": "one", "b": 2})
        assert invalid.error is not None and invalid.error.code == "invalid_arguments"
        assert invalid.error.message.startswith("invalid arguments for many_add: $.a: ")
        good = await turn.call("many_add", {"a": 1, "b": 2})
        assert good.ok and good.text == "3"
        assert calls_in(log) == ["add"]
        # every call left one audit row, arguments only as a hash
        await sup.store.flush()
        rows = sup.store.store.audit_rows(session=session.id)
        assert {(r.tool, r.outcome) for r in rows} == {
            ("many_add", "unknown_tool"),
            ("time_get_current_time", "ok"),
            ("many_crash", "denied"),
            ("many_add", "invalid_arguments"),
            ("many_add", "ok"),
        }
        assert all(len(r.args_sha256) == 64 for r in rows)


async def test_search_answers_from_the_cache_before_a_lazy_server_starts(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    spec = ServerSpec(
        name="many", command=(sys.executable, MINI, "--tools", "30", "--calls-log", str(log)), trusted=True
    )
    from supervisor.settings.model import Config

    config = Config(servers=(spec,))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        await session.begin_turn()  # unknown tools: the server is started and its list cached
        await sup.store.flush()
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        assert sup.servers()["many"].state.value == "idle"  # not started: the cache was enough
        found = turn.search("echo text")
        assert found["matches"][0]["id"] == "many_echo"
        assert found["matches"][0]["stale"] is True and found["matches"][0]["server_state"] == "idle"
        assert found["matches"][0]["availability"] == "on_demand"
        with trio.fail_after(10):
            echoed = await turn.call("many_echo", {"text": "hi"})  # the call starts the server
        assert echoed.ok and echoed.text == "hi"
