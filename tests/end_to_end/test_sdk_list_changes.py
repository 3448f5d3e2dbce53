"""Tool-list changes of real servers on the official SDK 2.x, in the 2026-07-28 era:
tests/servers/sdk_server.py ``--grow`` as a process of its own, over stdio and over
Streamable HTTP (the SDK's uvicorn stack). ``grow`` publishes the tool ``late`` and
says so on the ``subscriptions/listen`` subscriptions; the next turn lists and calls
it. Real clock, every wait bounded; the leak check of conftest.py runs after each."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from actors.spec import ServerSpec
from supervisor import Supervisor
from supervisor.calls.turns import Turn
from supervisor.sessions.session import Session
from supervisor.settings.model import Config
from tests.end_to_end.test_chaos import SDK_SERVER, remote, sdk_http_server
from tests.end_to_end.test_real_peers import needs_module
from tests.support.http_processes import listening_process

START_S = 20.0


async def grow_and_call_late(sup: Supervisor, session: Session, turn: Turn, name: str) -> None:
    """Call ``grow``; the change reaches the catalog, and a new turn calls ``late``."""
    assert f"{name}_late" not in {t.id for t in turn.tools}
    assert (await turn.call(f"{name}_grow", {})).ok
    with trio.fail_after(5.0):
        await sup.router.cell.wait_until(lambda c: f"{name}_late" in c.tools)
    reversed_ = await (await session.begin_turn()).call(f"{name}_late", {"text": "abc"})
    assert reversed_.ok and reversed_.text == "cba", reversed_


async def test_a_tool_added_by_a_stdio_sdk_server_reaches_the_next_turn(tmp_path: Path) -> None:
    """Over stdio the SDK sends list changes of the 2026-07-28 era only on a
    ``subscriptions/listen`` request (it used to be sent none: the change was never
    seen until a restart)."""
    needs_module("mcp")
    spec = ServerSpec(name="sdk", command=(sys.executable, SDK_SERVER, "--grow"), trusted=True)
    async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as session:
        with trio.fail_after(START_S):
            turn = await session.begin_turn()
        assert sup.servers()["sdk"].protocol_version == "2026-07-28"
        await grow_and_call_late(sup, session, turn, "sdk")


async def test_an_http_sdk_server_restarted_with_other_tools_is_listed_again(tmp_path: Path) -> None:
    """Over Streamable HTTP: ``grow`` reaches the next turn; then the server restarts
    gracefully (SIGTERM ends its listen streams, a new process with another tool set is
    back within about a second). The stream we open again is acknowledged by the new
    process, so changes went unheard: the lists are read again and a new turn shows
    exactly the new set (it used to stay steady on the old tools, hearing nothing)."""
    needs_module("mcp")
    async with sdk_http_server("--grow") as (port, process):
        config = Config(servers=(remote(port, ()),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            with trio.fail_after(START_S):
                turn = await session.begin_turn()
            assert sup.servers()["far"].protocol_version == "2026-07-28"
            await grow_and_call_late(sup, session, turn, "far")
            process.terminate()
            with trio.fail_after(5.0):
                await process.wait()
            command = [sys.executable, SDK_SERVER, "--http", str(port), "--only", "add,shout"]
            async with listening_process(command, port, "the restarted sdk_server.py"):
                with trio.fail_after(10.0):  # about 1 s: the stream is opened again after 1 s
                    await sup.router.cell.wait_until(lambda c: set(c.tools) == {"far_add", "far_shout"})
                later = await session.begin_turn()
                assert {t.id for t in later.tools} == {"far_add", "far_shout"}
                added = await later.call("far_add", {"a": 2, "b": 40})
                assert added.ok and added.text == "42", added
