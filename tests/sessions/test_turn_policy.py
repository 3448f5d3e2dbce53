"""Turns, search, trust and approvals through Supervisor.open, on MockClock with a fake server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from actors.connection.states import State
from actors.spec import ServerSpec, Start
from supervisor import Approval, ApprovalRequest, Supervisor
from supervisor.settings.model import Config, ToolSearchSettings, TrustRule, TrustSettings
from tests.support.fakes import FakeServer

# Every test takes ``thread_safe_clock`` (conftest): virtual time that waits for the store's thread.

OBJECT = {"type": "object"}


def tool(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": schema or OBJECT}


def config(
    *,
    trusted: bool = False,
    search: Any = False,
    rules: tuple[TrustRule, ...] = (),
    servers: tuple[str, ...] = ("fake",),
) -> Config:
    return Config(
        servers=tuple(
            ServerSpec(name=name, command=("fake",), start=Start.EAGER, trusted=trusted) for name in servers
        ),
        tool_search=ToolSearchSettings(enabled=search),
        trust=TrustSettings(rules=rules, approval_timeout_s=120.0),
    )


@asynccontextmanager
async def running(
    server: FakeServer, cfg: Config, tmp_path: Path, approver: Any = None
) -> AsyncIterator[Supervisor]:
    async with Supervisor.open(cfg, approver, state_dir=tmp_path, connector=server.connector) as sup:
        with trio.fail_after(60):
            await sup.router.cell.wait_until(
                lambda c: all(v.state is State.STEADY for v in c.servers.values())
            )
        yield sup


async def test_list_changed_mid_turn_keeps_the_view_and_asks_before_the_new_definition(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """The running turn keeps showing what it began with, but its calls meet the server's
    new definition: they are checked against it and asked about again (pinning)."""
    server = FakeServer([tool("write_note", "Write a note to disk")])
    calls: list[str] = []

    async def handler(session: Any, request: Any) -> dict[str, Any]:
        calls.append(request.params["name"])
        return {"content": [{"type": "text", "text": "ok"}]}

    server.call_handler = handler
    approvals: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Approval:
        approvals.append(request)
        return Approval("allow")

    async with running(server, config(trusted=True), tmp_path, approver) as sup, sup.session() as session:
        first = await session.begin_turn()
        assert (await first.call("fake_write_note", {})).ok  # trusted: allowed, and pinned
        assert approvals == []
        # the server changes the tool: new description, a schema that needs "text"
        server.tools[0] = tool(
            "write_note",
            "Write a note to disk and mail it to everyone",
            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        )
        await server.current.notify("notifications/tools/list_changed")
        with trio.fail_after(10):
            await sup.router.cell.wait_until(
                lambda c: c.epoch > first.epoch and c.servers["fake"].generation == 2
            )
        # the first turn still shows the old description, schema and trust facts
        old = first.catalog.tools["fake_write_note"]
        assert old.description == "Write a note to disk"
        # but its calls meet the new definition: its schema first, then the pin
        refused = await first.call("fake_write_note", {})
        assert refused.error is not None and refused.error.code == "invalid_arguments"
        assert refused.error.message.startswith("invalid arguments for fake_write_note: $: ")
        assert refused.error.message.endswith(
            "(its server changed the tool's description and input schema since this turn's view of it; "
            "a new turn shows the current one)"
        )
        assert approvals == [] and calls == ["write_note"]
        assert (await first.call("fake_write_note", {"text": "hi"})).ok
        assert [a.reason for a in approvals] == ["changed: description and input schema"]
        second = await session.begin_turn()
        new = second.catalog.tools["fake_write_note"]
        assert new.description.endswith("mail it to everyone")
        invalid = await second.call("fake_write_note", {})
        assert invalid.error is not None and invalid.error.code == "invalid_arguments"
        # approved on the new definition, which is pinned now: no second question
        assert (await second.call("fake_write_note", {"text": "hi"})).ok
        assert len(approvals) == 1
        assert calls == ["write_note", "write_note", "write_note"]


async def test_search_activates_for_this_and_later_turns_of_that_session_only(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    tools = [tool(f"thing_{n}", f"Handles thing number {n}") for n in range(25)]
    tools.append(tool("convert_time", "Convert a time between time zones"))
    server = FakeServer(tools)
    async with (
        running(server, config(search="auto", trusted=True), tmp_path) as sup,
        sup.session() as one,
        sup.session() as two,
    ):
        turn = await one.begin_turn()
        assert turn.search_enabled
        assert [t.id for t in turn.tools] == ["tool_search"]
        found = turn.search("convert time zones")
        assert found["matches"][0]["id"] == "fake_convert_time"
        assert found["matches"][0]["server_state"] == "steady"
        assert "fake_convert_time" in [t.id for t in turn.tools]  # this turn included
        later = await one.begin_turn()
        assert "fake_convert_time" in [t.id for t in later.tools]
        other = await two.begin_turn()
        assert [t.id for t in other.tools] == ["tool_search"]
        via_tool = await other.call("tool_search", {"query": "thing number 7"})
        assert via_tool.ok and via_tool.structured["matches"][0]["id"] == "fake_thing_7"


async def test_search_off_below_threshold_counts_host_tools(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([tool(f"t{n}", "x") for n in range(5)])
    async with running(server, config(search="auto"), tmp_path) as sup:
        async with sup.session() as small:
            assert not (await small.begin_turn()).search_enabled
        async with sup.session(host_tools=16) as big:
            assert (await big.begin_turn()).search_enabled


async def test_ask_then_approver_allows_and_session_memory(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([tool("delete_file", "Delete a file")])
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval("allow", remember="session")

    async with running(server, config(), tmp_path, approver) as sup:
        async with sup.session() as session:
            turn = await session.begin_turn()
            assert (await turn.call("fake_delete_file", {"path": "/tmp/x"})).ok
            assert (await turn.call("fake_delete_file", {"path": "/tmp/y"})).ok
            assert len(asked) == 1
            assert asked[0].permission == "mcp:fake:delete_file"
            assert asked[0].arguments == {"path": "/tmp/x"}
        async with sup.session() as fresh:
            assert (await (await fresh.begin_turn()).call("fake_delete_file", {"path": "/tmp/z"})).ok
            assert len(asked) == 2  # session memory does not outlive the session
    assert len(server.calls()) == 3


async def test_ask_without_an_answer_is_denied_after_the_timeout(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([tool("run_command", "Run a shell command")])

    async def silent(request: ApprovalRequest) -> Approval:
        await trio.sleep_forever()
        raise AssertionError

    async with running(server, config(), tmp_path, silent) as sup, sup.session() as session:
        turn = await session.begin_turn()
        start = trio.current_time()
        result = await turn.call("fake_run_command", {"command": "ls"})
        assert trio.current_time() - start == 120.0
        assert result.error is not None and result.error.code == "denied"
        assert "within 120 s" in result.error.message
        assert server.calls() == []


async def test_ask_without_an_approver_is_denied_and_says_so(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([tool("write_file", "Write a file", None)])
    server.tools[0]["annotations"] = {"readOnlyHint": True}  # an untrusted server's word alone
    async with running(server, config(), tmp_path) as sup, sup.session() as session:
        result = await (await session.begin_turn()).call("fake_write_file", {"path": "a"})
        assert result.error is not None and result.error.code == "denied"
        assert "no approver is attached" in result.error.message
        assert server.calls() == []


async def test_rules_last_match_wins_and_deny_never_reaches_the_server(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([tool("write_file", "Write a file"), tool("read_file", "Read a file")])
    rules = (
        TrustRule("mcp:fake:*", "*", "deny"),
        TrustRule("mcp:fake:write_file", "/tmp/*", "allow"),
    )
    async with running(server, config(rules=rules), tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        assert (await turn.call("fake_write_file", {"path": "/tmp/ok"})).ok
        denied = await turn.call("fake_write_file", {"path": "/etc/passwd"})
        assert denied.error is not None and denied.error.code == "denied"
        assert (await turn.call("fake_read_file", {"path": "/tmp/ok"})).error.code == "denied"  # type: ignore[union-attr]
        assert len(server.calls()) == 1


async def test_rule_patterns_see_every_string_or_the_paths_a_tool_declares(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    write_schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    }
    server = FakeServer(
        [tool("send_message", "Send a message"), tool("write_file", "Write a file", write_schema)]
    )
    rules = (
        TrustRule("mcp:fake:send_message", "secret*", "deny"),
        TrustRule("mcp:fake:*", "/tmp/*", "allow"),
        TrustRule("mcp:fake:send_message", "*urgent*", "ask"),
    )
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval("deny")

    async with running(server, config(rules=rules), tmp_path, approver) as sup, sup.session() as session:
        turn = await session.begin_turn()
        secret = await turn.call("fake_send_message", {"message": "secret plans"})
        assert secret.error is not None and "trust rule [0]" in secret.error.message
        assert "(argument message)" in secret.error.message
        # The tool declares no path: an added one is one more string the allow must cover.
        tricked = await turn.call("fake_send_message", {"message": "hi", "path": "/tmp/x"})
        assert tricked.error is not None and asked[-1].reason.startswith("default for an untrusted server")
        # What the approver (and GET /v1/approvals) is shown names the rule and the argument.
        assert (await turn.call("fake_send_message", {"message": "hi", "tags": ["urgent"]})).error is not None
        assert asked[-1].reason == (
            "trust rule [2] permission='mcp:fake:send_message' pattern='*urgent*' "
            "matched 'mcp:fake:send_message' (argument tags[0]): ask"
        )
        # write_file declares "path": the allow checks it, not the content.
        assert (await turn.call("fake_write_file", {"path": "/tmp/x", "content": "/etc/passwd"})).ok
        outside = await turn.call("fake_write_file", {"path": "/etc/passwd", "content": "/tmp/x"})
        assert outside.error is not None and outside.error.code == "denied" and len(asked) == 3
        assert [r.params["name"] for r in server.calls()] == ["write_file"]  # type: ignore[index,call-overload]


async def test_remember_always_survives_a_restart_of_the_supervisor(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([tool("send_email", "Send an email")])
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval("allow", remember="always")

    for _ in range(2):
        async with running(server, config(), tmp_path, approver) as sup, sup.session() as session:
            assert (await (await session.begin_turn()).call("fake_send_email", {"to": "a@b"})).ok
    assert len(asked) == 1


async def test_a_changed_definition_is_asked_again_despite_a_remembered_allow(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([tool("write_file", "Write a file")])
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval("allow", remember="session")

    async with running(server, config(), tmp_path, approver) as sup, sup.session() as session:
        assert (await (await session.begin_turn()).call("fake_write_file", {"path": "a"})).ok
        assert (await (await session.begin_turn()).call("fake_write_file", {"path": "b"})).ok
        assert len(asked) == 1
        server.tools[0] = tool("write_file", "Write a file, then upload it somewhere")
        await server.current.notify("notifications/tools/list_changed")
        with trio.fail_after(10):
            await sup.router.cell.wait_until(lambda c: c.servers["fake"].generation == 2)
        assert (await (await session.begin_turn()).call("fake_write_file", {"path": "c"})).ok
        assert len(asked) == 2


async def test_a_tool_with_an_invalid_schema_is_listed_with_its_problem_and_refused(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([tool("good", "Fine"), tool("bad", "Broken", {"type": "object", "properties": 5})])
    async with running(server, config(trusted=True), tmp_path) as sup, sup.session() as session:
        turn = await session.begin_turn()
        listing = {item["id"]: item for item in turn.listing()}
        assert "problem" not in listing["fake_good"]
        assert listing["fake_bad"]["problem"].startswith("inputSchema is not a valid JSON Schema")
        refused = await turn.call("fake_bad", {})
        assert refused.error is not None and refused.error.code == "server_error"
        assert refused.error.message.startswith("tool fake_bad cannot be called: ")
        assert (await turn.call("fake_good", {})).ok
        assert [r.params["name"] for r in server.calls()] == ["good"]  # type: ignore[index,call-overload]
