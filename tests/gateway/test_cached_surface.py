"""A lazy server's resources and prompts are listed before it starts, from the store,
like its tools, and marked stale (``supervisor/runtime/server_memory.py``): on the
stdio front (the real command, a state directory kept between two runs) and in the
admin API's turn listings, with tool search on (so a turn starts only servers it
knows nothing of). Reading the stale resource starts the server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from actors.spec import ServerSpec, Start
from supervisor.settings.model import Config, ToolSearchSettings
from tests.gateway.test_stdio_front import CLI, INITIALIZE, rpc
from tests.support.admin import MINI, admin_running, conforms


def methods_of(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


async def stdio_run(tmp_path: Path, *requests: bytes) -> dict[int, Any]:
    """``mcp-supervisor stdio`` with ``requests`` piped in: the answers by id."""
    methods = tmp_path / "methods.log"
    server = {"command": [sys.executable, MINI, "--surface", "--methods-log", str(methods)], "trusted": True}
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"servers": {"mini": server}, "tool_search": {"enabled": True}}))
    command = [str(CLI), "stdio", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    with trio.fail_after(20):
        done = await trio.run_process(command, stdin=INITIALIZE + b"".join(requests), capture_stdout=True)
    return {answer["id"]: answer for answer in map(json.loads, done.stdout.splitlines())}


async def test_a_lazy_servers_resources_and_prompts_are_listed_from_the_store_before_it_starts(
    tmp_path: Path,
) -> None:
    methods = tmp_path / "methods.log"
    first = await stdio_run(tmp_path, rpc(2, "tools/list"))  # its tools unknown: it starts and lists
    assert "result" in first[2] and methods_of(methods).count("initialize") == 1
    assert "resources/list" in methods_of(methods) and "prompts/list" in methods_of(methods)

    again = await stdio_run(tmp_path, rpc(2, "resources/list"), rpc(3, "prompts/list"))
    assert methods_of(methods).count("initialize") == 1  # the second run never started it
    capabilities = again[1]["result"]["capabilities"]
    assert "resources" in capabilities and "prompts" in capabilities
    assert again[2]["result"]["resources"] == [
        {"uri": "mini://notes", "name": "notes", "mimeType": "text/plain"}
    ]
    (greet,) = again[3]["result"]["prompts"]
    assert greet["name"] == "mini_greet" and greet["arguments"] == [{"name": "who", "required": True}]

    # serve's admin API lists the same, marked stale; a read starts the server.
    spec = ServerSpec(
        "mini",
        command=(sys.executable, MINI, "--surface", "--methods-log", str(methods)),
        trusted=True,
        start=Start.LAZY,
    )
    config = Config(servers=(spec,), tool_search=ToolSearchSettings(enabled=True))
    async with admin_running(config, tmp_path / "state") as api:
        http = api.http()
        with trio.fail_after(20):
            sid = await http.session()
            turn = (await http.turn(sid))["turn_id"]
            resources = await http.request("GET", f"/v1/sessions/{sid}/turns/{turn}/resources")
            prompts = await http.request("GET", f"/v1/sessions/{sid}/turns/{turn}/prompts")
            conforms("list_resources", resources)
            conforms("list_prompts", prompts)
            (notes,) = resources.json()["resources"]
            assert (notes["uri"], notes["availability"], notes["stale"]) == (
                "mini://notes",
                "on_demand",
                True,
            )
            (listed,) = prompts.json()["prompts"]
            assert (listed["id"], listed["stale"]) == ("mini_greet", True)
            assert methods_of(methods).count("initialize") == 1
            read = await http.request(
                "POST", f"/v1/sessions/{sid}/turns/{turn}/resources/read", json={"uri": "mini://notes"}
            )
            assert read.json()["text"] == "mini notes", read
        assert methods_of(methods).count("initialize") == 2  # the read started it
