"""Pinning when a call meets a definition its turn did not show: a lazy restart by a
config reload, a server that keeps changing the tool, pins across supervisor restarts.
Through Supervisor.open on MockClock (``thread_safe_clock``) with a scripted server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from actors.connection.states import State
from actors.protocol.messages import Tool
from actors.router.catalog import Catalog, make_entry
from actors.router.envelope import Envelope
from actors.router.trust import Action, Decision
from actors.spec import ServerSpec, Start
from supervisor import Approval, ApprovalRequest, Supervisor
from supervisor.sessions.approvals import Approver
from supervisor.sessions.policy import Policy
from supervisor.settings.model import Config, ToolSearchSettings, TrustRule, TrustSettings
from tests.support.fakes import FakeServer

NOTE = "fake_write_note"
ALLOW_IT = TrustRule("mcp:fake:write_note", "*", "allow")


def note(description: str) -> dict[str, Any]:
    return {"name": "write_note", "description": description, "inputSchema": {"type": "object"}}


def config(command: str = "fake", *, start: Start = Start.LAZY) -> Config:
    """One untrusted server whose tool a rule allows (so only a pin asks about it)."""
    return Config(
        servers=(ServerSpec(name="fake", command=(command,), start=start),),
        tool_search=ToolSearchSettings(enabled=True),  # so a turn may hold a cached list
        trust=TrustSettings(rules=(ALLOW_IT,), approval_timeout_s=120.0),
    )


@asynccontextmanager
async def supervised(
    server: FakeServer,
    state_dir: Path,
    approver: Any = None,
    *,
    start: Start = Start.LAZY,
    stale: bool = False,
) -> AsyncIterator[Supervisor]:
    """The supervisor, after one call of the tool (so it is allowed, and pinned);
    ``stale``: the state directory knows the tool already."""
    cfg = config(start=start)
    async with Supervisor.open(cfg, approver, state_dir=state_dir, connector=server.connector) as sup:
        if start is Start.EAGER:
            with trio.fail_after(60):
                await sup.router.cell.wait_until(steady)
        assert (await call_in_a_new_session(sup, stale=stale)).ok
        yield sup


def steady(catalog: Catalog) -> bool:
    return catalog.servers["fake"].state is State.STEADY


@asynccontextmanager
async def restarted_lazily(
    server: FakeServer, state_dir: Path, description: str, approver: Any = None
) -> AsyncIterator[Supervisor]:
    """The supervisor after one allowed call, then a reload that restarts the server (a
    changed launch key) while the tool's description becomes ``description``: the new
    server waits, idle, for a call."""
    async with supervised(server, state_dir, approver) as sup:
        server.tools[0] = note(description)
        await sup.store.flush()  # the old list is in the store (virtual time: at once)
        plan = await sup.reload(config("fake-v2"))
        assert plan.report()["restarted"] == ["fake"]
        yield sup


async def call_in_a_new_session(sup: Supervisor, *, stale: bool = False) -> Envelope:
    """A session that finds the tool and calls it once (``stale``: its turn holds the
    store's last-known list, the server not started)."""
    async with sup.session() as session:
        turn = await session.begin_turn()
        assert turn.catalog.servers["fake"].cached_only is stale
        assert turn.search("write a note")["matches"][0]["id"] == NOTE
        return await turn.call(NOTE, {})


def allowing(asked: list[str]) -> Approver:
    """An approver that allows once, noting why it was asked."""

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request.reason)
        return Approval("allow")

    return approver


async def test_a_lazy_restart_with_a_new_description_asks_again_naming_it(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([note("Write a note")])
    asked: list[str] = []
    async with restarted_lazily(server, tmp_path, "Write a note and mail it", allowing(asked)) as sup:
        assert (await call_in_a_new_session(sup, stale=True)).ok  # the call starts the server
        assert asked == ["changed: description"]  # (the rule allowed the first call)
        assert len(server.calls()) == 2


async def test_with_nobody_to_ask_the_call_is_denied_saying_what_changed(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([note("Write a note")])
    async with restarted_lazily(server, tmp_path, "Write a note and mail it") as sup:
        denied = await call_in_a_new_session(sup, stale=True)
        assert denied.error is not None and denied.error.code == "denied"
        assert denied.error.message == (
            "approval required for fake_write_note (changed: description) but no approver is "
            "attached; attach one or add a trust rule"
        )
        assert len(server.calls()) == 1  # the changed tool was never called
        assert sup.router.cell.current.servers["fake"].state is State.STEADY


async def test_an_unchanged_definition_after_a_lazy_restart_is_not_asked_about(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([note("Write a note")])
    async with restarted_lazily(server, tmp_path, "Write a note") as sup:
        assert (await call_in_a_new_session(sup, stale=True)).ok  # no approver: an ask is denied
        assert len(server.calls()) == 2


async def test_a_server_that_keeps_changing_the_tool_under_the_call_is_given_up_on(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """Each approval meets yet another definition: after the third such change the call
    ends, unsent (asked four times: once for the turn's definition, then once a change)."""
    server = FakeServer([note("Write a note")])
    asked: list[str] = []

    async def changed(description: str) -> None:
        generation = sup.router.cell.current.servers["fake"].generation
        server.tools[0] = note(description)
        await server.current.notify("notifications/tools/list_changed")
        await sup.router.cell.wait_until(lambda c: c.servers["fake"].generation > generation)

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request.reason)
        await changed(f"Write a note, version {len(asked) + 1}")
        return Approval("allow")

    async with supervised(server, tmp_path, approver, start=Start.EAGER) as sup:
        await changed("Write a note, version 1")
        given_up = await call_in_a_new_session(sup)
        assert given_up.error is not None and given_up.error.code == "server_error"
        assert given_up.error.message == (
            "mcp server fake changed tool write_note 3 times while it was being called"
        )
        assert asked == ["changed: description"] * 4
        assert len(server.calls()) == 1


async def test_pins_kept_across_a_restart_of_the_supervisor_still_say_what_changed(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([note("Write a note")])
    asked: list[str] = []
    async with supervised(server, tmp_path):
        pass
    server.tools[0] = {**note("Write a note"), "inputSchema": {"type": "object", "properties": {}}}
    async with supervised(server, tmp_path, allowing(asked), start=Start.EAGER):  # listed first
        pass
    assert asked == ["changed: input schema"]


def test_a_pin_kept_without_its_parts_cannot_say_which_part_changed() -> None:
    """Pins from a store older than their part hashes (schema version 5)."""
    spec = ServerSpec(name="fake", command=("fake",), trusted=True)
    entry = make_entry(NOTE, spec, Tool("write_note", "Write a note"), 200)
    policy = Policy(TrustSettings(), trusted=lambda server: True, pins={("fake", "write_note"): "an old pin"})
    decision = policy.decide(entry, {}, tenant="default", memory={})
    assert decision == Decision(Action.ASK, "changed: description or input schema", None)
    policy.allowed(entry)  # from now on the parts are kept with the pin
    changed = make_entry(NOTE, spec, Tool("write_note", "Write a note, and mail it"), 200)
    assert policy.decide(changed, {}, tenant="default", memory={}).reason == "changed: description"
