"""Pins that say what changed, across supervisor restarts too. Through Supervisor.open
on MockClock (``thread_safe_clock``) with a scripted server, and on Policy itself."""

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
