"""Pinning across a lazy restart, against real subprocess servers (real clock).

A tool allowed "always" whose description changes while a config reload restarts its
server: the restarted server is lazy, so a turn begun after the reload holds the old
definition (from the store's cache) and the call itself starts the server. The call
must be asked about again, naming what changed, before the new definition is called.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from actors.connection.states import State
from supervisor import Approval, ApprovalRequest, Supervisor
from supervisor.settings.loader import load_config
from tests.service.test_runtime_servers import BOUND_S, MINI, steady

WRITE_NOTE = "notes_write_note"
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def tools_file(path: Path, description: str) -> Path:
    path.write_text(json.dumps([{"name": "write_note", "description": description, "inputSchema": SCHEMA}]))
    return path


def write_config(path: Path, tools: Path) -> Path:
    notes = {"command": [sys.executable, MINI, "--tools-file", str(tools)]}
    path.write_text(json.dumps({"servers": {"notes": notes}, "tool_search": {"enabled": True}}))
    return path


async def test_an_always_allowed_tool_is_asked_again_after_a_lazy_restart_changed_it(tmp_path: Path) -> None:
    before = tools_file(tmp_path / "before.json", "Write a note to disk")
    after = tools_file(tmp_path / "after.json", "Write a note to disk and mail it to everyone")
    file = write_config(tmp_path / "config.json", before)
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval("allow", remember="always")

    async with (
        Supervisor.open(load_config(file), approver, state_dir=tmp_path / "state") as sup,
        sup.session() as session,
    ):
        with trio.fail_after(BOUND_S):
            first = await session.begin_turn()  # unknown tools: the lazy server starts
            assert first.search("write a note to disk")["matches"][0]["id"] == WRITE_NOTE
            assert (await first.call(WRITE_NOTE, {"text": "hi"})).ok
        assert [r.reason.startswith("default for an untrusted server: ask") for r in asked] == [True]

        write_config(file, after)  # a changed launch key: the server restarts, lazily
        with trio.fail_after(BOUND_S):
            await sup.store.flush()  # the store has the old list (a busy machine may lag)
            plan = await sup.reload()
            assert plan.report()["restarted"] == ["notes"]
            second = await session.begin_turn()
        view = second.catalog.servers["notes"]
        assert view.state is State.IDLE and view.cached_only  # the old definition, from the store
        assert second.catalog.tools[WRITE_NOTE].description == "Write a note to disk"

        with trio.fail_after(BOUND_S):
            called = await second.call(WRITE_NOTE, {"text": "hi again"})  # starts the server
            await sup.router.cell.wait_until(steady("notes"))
        assert called.ok, called
        assert len(asked) == 2, [r.reason for r in asked]
        assert asked[1].reason.startswith("changed: description;"), asked[1].reason
        assert asked[1].tool == WRITE_NOTE and asked[1].permission == "mcp:notes:write_note"

        with trio.fail_after(BOUND_S):  # allowed always, the new definition is pinned
            third = await session.begin_turn()
            assert third.catalog.tools[WRITE_NOTE].description.endswith("mail it to everyone")
            assert (await third.call(WRITE_NOTE, {"text": "and again"})).ok
        assert len(asked) == 2
