"""RouterActor driven directly through its mailbox (catalog epochs: every change makes a
new immutable catalog, with a larger epoch when a turn would see the difference, and a
turn keeps the one it began with).

No connection actors: the test plays them, publishing ``ServerListed`` and
``StateChanged`` as they would, and reads the ``CatalogCell``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from itertools import pairwise
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actors.connection.messages import ConnectionMessage, ServerListed, StateChanged
from actors.connection.states import Phase, State
from actors.protocol.messages import Tool
from actors.router.actor import (
    AddServer,
    CatalogCell,
    DropOwner,
    RegisterServer,
    RemoveServer,
    RetuneServers,
    RouterActor,
    RouterMessage,
    StopRouter,
)
from actors.router.catalog import Catalog
from actors.spec import ServerSpec

WAIT_S = 10.0  # virtual seconds: a hang fails at once on the autojump clock


def connection_mailbox() -> trio.MemorySendChannel[ConnectionMessage]:
    send, _receive = trio.open_memory_channel[ConnectionMessage](1)
    return send


@attrs.define
class Harness:
    router: RouterActor
    send: trio.MemorySendChannel[RouterMessage]

    @property
    def cell(self) -> CatalogCell:
        return self.router.cell

    @property
    def current(self) -> Catalog:
        return self.router.cell.current

    async def feed(self, *messages: RouterMessage) -> Catalog:
        """Queue ``messages`` together and return the catalog they produced."""
        before = self.current
        for message in messages:
            self.send.send_nowait(message)
        with trio.fail_after(WAIT_S):
            catalog = await self.cell.wait_until(lambda c: c is not before)
        await trio.testing.wait_all_tasks_blocked()
        assert self.current is catalog, "more than one catalog for one batch"
        assert catalog.epoch in (before.epoch, before.epoch + 1)
        return catalog

    async def walk(self, server: str, *states: State, owner: str | None = None) -> list[Catalog]:
        """Move ``server`` through ``states``, one epoch per step."""
        catalogs = []
        for state in states:
            view = self.current.view_for(owner).servers[server]
            phase = phase_after(view.state, view.phase, state)
            catalogs.append(await self.feed(moved(server, state, view.state, owner=owner, phase=phase)))
        return catalogs


def phase_after(previous: State, phase: Phase | None, state: State) -> Phase | None:
    """The phase a connection actor announces with ``state`` (see states.py): the
    router's availability rule reads it."""
    if state not in (State.RESOLVE, State.AUTHENTICATE, State.HANDSHAKE, State.LIST):
        return None
    if state is State.LIST and previous is State.STEADY:
        return Phase.RELISTING
    if state is State.RESOLVE:
        return Phase.STARTING if previous is State.IDLE else Phase.RECONNECTING
    return phase


@asynccontextmanager
async def running_router(*names: str) -> AsyncIterator[Harness]:
    send, receive = trio.open_memory_channel[RouterMessage](64)
    router = RouterActor([(ServerSpec(name), connection_mailbox()) for name in names], receive)
    async with trio.open_nursery() as nursery:
        await nursery.start(router.run)
        yield Harness(router, send)
        send.close()  # the router's loop ends with its mailbox; the nursery then exits


def moved(
    server: str,
    state: State,
    previous: State,
    *,
    at: float = 0.0,
    attempt: int = 0,
    reason: str | None = None,
    next_retry_at: float | None = None,
    owner: str | None = None,
    phase: Phase | None = None,
) -> StateChanged:
    return StateChanged(server, state, previous, at, attempt, reason, next_retry_at, owner, phase=phase)


def listed(server: str, *tools: str, generation: int = 1, owner: str | None = None) -> ServerListed:
    return ServerListed(
        server,
        generation,
        tuple(Tool(name, description=f"{name} things") for name in tools),
        owner=owner,
    )


UP = (State.RESOLVE, State.AUTHENTICATE, State.HANDSHAKE, State.LIST, State.STEADY)


# ---------------------------------------------------------------- basics


async def test_initial_catalog_knows_the_configured_servers(autojump_clock: trio.testing.MockClock) -> None:
    async with running_router("time", "github") as h:
        catalog = h.current
        assert catalog.epoch == 1
        assert list(catalog.servers) == ["time", "github"]
        for view in catalog.servers.values():
            assert view.state is State.IDLE
            assert view.available is False
        assert dict(catalog.tools) == {}
        assert catalog.listing == ()


async def test_tools_are_namespaced_and_listed_in_config_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with running_router("time", "github") as h:
        await h.feed(listed("github", "create_issue"))
        catalog = await h.feed(listed("time", "get", "convert"))
        assert [entry.id for entry in catalog.listing] == ["time_get", "time_convert", "github_create_issue"]
        entry = catalog.tools["time_convert"]
        assert (entry.server, entry.name, entry.description) == ("time", "convert", "convert things")
        assert entry.input_schema == {"type": "object"}
        assert catalog.servers["time"].tool_names == ("get", "convert")
        assert catalog.servers["time"].generation == 1


async def test_a_new_list_replaces_the_old_one(autojump_clock: trio.testing.MockClock) -> None:
    async with running_router("time") as h:
        await h.feed(listed("time", "get", "set"))
        catalog = await h.feed(listed("time", "get", "zone", generation=2))
        assert set(catalog.tools) == {"time_get", "time_zone"}
        assert catalog.servers["time"].generation == 2


async def test_epochs_move_only_when_a_turn_would_see_a_change(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with running_router("time") as h:
        epochs = [h.current.epoch]
        epochs.append((await h.feed(listed("time", "get"))).epoch)  # new tools
        # Idle and starting are both "on demand"; steady is available: one move.
        epochs.extend(c.epoch for c in await h.walk("time", *UP))
        epochs.extend(c.epoch for c in await h.walk("time", State.BACKOFF, State.RESOLVE))
        start = epochs[0]
        assert epochs == [start, start + 1, *[start + 1] * 4, start + 2, start + 3, start + 3]
        assert all(later >= earlier for earlier, later in pairwise(epochs))


async def test_a_retune_moves_the_epoch_only_when_it_changes_something(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with running_router("time") as h:
        before = await h.feed(listed("time", "get"))
        same = await h.feed(RetuneServers((ServerSpec("time"),), 200))  # a reload that left it alone
        assert same.epoch == before.epoch
        trusted = await h.feed(RetuneServers((ServerSpec("time", trusted=True),), 200))
        assert trusted.epoch == before.epoch + 1 and trusted.servers["time"].spec.trusted


async def test_unknown_server_is_ignored(autojump_clock: trio.testing.MockClock) -> None:
    async with running_router("time") as h:
        catalog = await h.feed(moved("nope", State.STEADY, State.LIST), listed("nope", "x"))
        assert list(catalog.servers) == ["time"]
        assert dict(catalog.tools) == {}
        catalog = await h.feed(listed("time", "get"))  # still running
        assert "time_get" in catalog.tools


async def test_router_ends_when_its_mailbox_closes(autojump_clock: trio.testing.MockClock) -> None:
    send, receive = trio.open_memory_channel[RouterMessage](1)
    router = RouterActor([(ServerSpec("time"), connection_mailbox())], receive)
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(router.run)
            await send.aclose()


async def test_stop_router_folds_what_came_before_then_ends(autojump_clock: trio.testing.MockClock) -> None:
    send, receive = trio.open_memory_channel[RouterMessage](8)
    router = RouterActor([(ServerSpec("time"), connection_mailbox())], receive)
    with trio.fail_after(WAIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(router.run)
            # Sent together with the stop, still folded (one epoch), and nothing after it.
            send.send_nowait(listed("time", "get"))
            send.send_nowait(moved("time", State.STOPPED, State.TEARDOWN))
            send.send_nowait(StopRouter())
            send.send_nowait(listed("time", "late"))
        # The nursery exited although our send end is still open: the router ended.
    assert router.cell.current.servers["time"].state is State.STOPPED
    assert list(router.cell.current.tools) == ["time_get"]
    with pytest.raises(trio.BrokenResourceError):  # its mailbox closed with it
        send.send_nowait(listed("time", "later"))


async def test_a_server_added_while_running_joins_with_its_cached_tools(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with running_router("time") as h:
        cached = ServerListed("docs", 0, (Tool("find", description="find documents"),))
        catalog = await h.feed(AddServer(ServerSpec("docs"), connection_mailbox(), cached))
        assert list(catalog.servers) == ["time", "docs"]
        view = catalog.servers["docs"]
        assert (view.state, view.stale, view.available) == (State.IDLE, True, False)
        assert [m.id for m in catalog.search_index.search("documents")] == ["docs_find"]
        catalog = await h.feed(listed("docs", "find", "read"))
        assert set(catalog.tools) == {"docs_find", "docs_read"}
        assert not catalog.servers["docs"].stale
        same = await h.feed(AddServer(ServerSpec("docs"), connection_mailbox()))  # taken: ignored
        assert same.servers["docs"] is catalog.servers["docs"]


async def test_a_server_removed_while_running_takes_its_tools_along(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with running_router("a_b", "a") as h:
        collided = await h.feed(listed("a_b", "c"), listed("a", "b_c"))
        assert "a_b_c" not in collided.tools  # both ids hashed: they collide
        catalog = await h.feed(RemoveServer("a"))
        assert list(catalog.servers) == ["a_b"]
        assert list(catalog.tools) == ["a_b_c"]  # no collision left: the plain id again
        assert catalog.search_index.servers == ("a_b",)
        assert [e.id for e in catalog.listing] == ["a_b_c"]
        late = await h.feed(moved("a", State.STOPPED, State.TEARDOWN))  # dropped
        assert list(late.servers) == ["a_b"]
        again = await h.feed(RemoveServer("a"))
        assert again.servers == catalog.servers
        assert collided.servers["a"].entries  # an old epoch keeps what it had


# ---------------------------------------------------------------- snapshots


async def test_old_catalogs_never_change(autojump_clock: trio.testing.MockClock) -> None:
    async with running_router("time", "github") as h:
        await h.feed(listed("time", "get", "set"))
        old = (await h.walk("time", *UP))[-1]
        saved_tools, saved_listing, saved_servers = dict(old.tools), old.listing, dict(old.servers)
        saved_view = old.servers["time"]

        await h.feed(listed("time", "other", generation=2))
        await h.walk("time", State.BACKOFF)
        await h.feed(listed("github", "create_issue"))
        await h.feed(RegisterServer(ServerSpec("mine"), connection_mailbox(), owner="s1"))
        new = h.current

        assert new.epoch > old.epoch
        assert set(new.tools) == {"time_other", "github_create_issue"}
        assert new.servers["time"].state is State.BACKOFF

        assert dict(old.tools) == saved_tools
        assert set(old.tools) == {"time_get", "time_set"}
        assert old.listing == saved_listing
        assert dict(old.servers) == saved_servers
        assert old.servers["time"] is saved_view
        assert old.servers["time"].state is State.STEADY
        assert old.servers["time"].available is True
        assert dict(old.overlays) == {}
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            old.epoch = 99  # type: ignore[misc]


# ---------------------------------------------------------------- availability


async def test_available_only_when_calls_can_flow(autojump_clock: trio.testing.MockClock) -> None:
    async with running_router("time") as h:
        steps = [
            (State.RESOLVE, False),
            (State.AUTHENTICATE, False),
            (State.HANDSHAKE, False),
            (State.LIST, False),  # first list: nothing to call yet
            (State.STEADY, True),
            (State.LIST, True),  # relist after list_changed: calls flow on the old list
            (State.STEADY, True),
            (State.BACKOFF, False),
            (State.RESOLVE, False),
            (State.AUTHENTICATE, False),
            (State.HANDSHAKE, False),
            (State.LIST, False),  # a list after a reconnect is not a relist
            (State.STEADY, True),
        ]
        for state, available in steps:
            (catalog,) = await h.walk("time", state)
            view = catalog.servers["time"]
            assert (view.state, view.available) == (state, available)


async def test_list_straight_after_backoff_is_unavailable(autojump_clock: trio.testing.MockClock) -> None:
    # Even if a (buggy) actor skipped states, only a relist (steady → list) keeps a server available.
    async with running_router("time") as h:
        await h.walk("time", *UP, State.BACKOFF)
        (catalog,) = await h.walk("time", State.LIST)
        assert catalog.servers["time"].available is False


@pytest.mark.parametrize("phase", [Phase.STARTING, Phase.RECONNECTING, None])
async def test_only_a_relist_keeps_a_list_available(
    autojump_clock: trio.testing.MockClock, phase: Phase
) -> None:
    async with running_router("time") as h:
        await h.walk("time", *UP)
        catalog = await h.feed(moved("time", State.LIST, State.STEADY, phase=phase))
        assert catalog.servers["time"].available is False
        catalog = await h.feed(moved("time", State.LIST, State.STEADY, phase=Phase.RELISTING))
        view = catalog.servers["time"]
        assert view.available is True and view.phase is Phase.RELISTING
        assert view.transitions[-1].phase is Phase.RELISTING


async def test_tools_stay_listed_while_the_server_is_down(autojump_clock: trio.testing.MockClock) -> None:
    async with running_router("time") as h:
        await h.feed(listed("time", "get"))
        await h.walk("time", *UP)
        catalog = await h.feed(
            moved("time", State.BACKOFF, State.STEADY, at=12.5, attempt=2, reason="eof", next_retry_at=17.5)
        )
        assert "time_get" in catalog.tools
        assert [e.id for e in catalog.listing] == ["time_get"]
        view = catalog.servers["time"]
        assert view.available is False
        assert (view.state, view.since, view.attempt, view.next_retry_at) == (State.BACKOFF, 12.5, 2, 17.5)


async def test_last_error_keeps_the_last_failure_reason_and_when_it_came(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with running_router("time") as h:
        assert h.current.servers["time"].last_error is None
        assert h.current.servers["time"].last_error_at is None
        await h.walk("time", State.RESOLVE)
        catalog = await h.feed(
            moved("time", State.BACKOFF, State.RESOLVE, at=3.0, reason="command not found")
        )
        assert catalog.servers["time"].last_error == "command not found"
        for catalog in await h.walk("time", *UP):  # no reason on the way up: the old one stays
            assert catalog.servers["time"].last_error == "command not found"
            assert catalog.servers["time"].last_error_at == 3.0
        catalog = await h.feed(moved("time", State.BACKOFF, State.STEADY, at=9.5, reason="timeout"))
        assert catalog.servers["time"].last_error == "timeout"
        assert catalog.servers["time"].last_error_at == 9.5


# ---------------------------------------------------------------- folding


async def test_messages_queued_together_fold_into_one_epoch(autojump_clock: trio.testing.MockClock) -> None:
    async with running_router("time", "github") as h:
        before = h.current.epoch
        catalog = await h.feed(
            moved("time", State.HANDSHAKE, State.AUTHENTICATE),
            moved("time", State.LIST, State.HANDSHAKE),
            listed("time", "get"),
            moved("time", State.STEADY, State.LIST),
            listed("github", "create_issue"),
        )
        assert catalog.epoch == before + 1
        assert catalog.servers["time"].state is State.STEADY
        assert catalog.servers["time"].available is True
        assert set(catalog.tools) == {"time_get", "github_create_issue"}


# ---------------------------------------------------------------- overlays


async def test_private_servers_show_only_to_their_owner(autojump_clock: trio.testing.MockClock) -> None:
    async with running_router("time") as h:
        await h.feed(listed("time", "get"))
        await h.feed(RegisterServer(ServerSpec("notes"), connection_mailbox(), owner="s1"))
        await h.feed(listed("notes", "read", owner="s1"))
        (catalog,) = await h.walk("notes", State.STEADY, owner="s1")

        for shared in (catalog, catalog.view_for(None), catalog.view_for("s2")):
            assert set(shared.tools) == {"time_get"}
            assert "notes" not in shared.servers

        mine = catalog.view_for("s1")
        assert mine.epoch == catalog.epoch
        assert catalog.view_for("s1") is mine  # built once per epoch: per-turn caches key on it
        assert set(mine.tools) == {"time_get", "notes_read"}
        assert mine.servers["notes"].available is True
        assert mine.servers["notes"].owner == "s1"

        # A session's messages never reach a shared server of the same name.
        catalog = await h.feed(
            listed("time", "hijack", owner="s1"), moved("time", State.STEADY, State.LIST, owner="s1")
        )
        assert set(catalog.tools) == {"time_get"}
        assert catalog.servers["time"].state is State.IDLE

        dropped = await h.feed(DropOwner("s1"))
        assert dropped.epoch == catalog.epoch  # the session has ended: no turn sees a change
        assert "s1" not in dropped.overlays
        assert set(dropped.view_for("s1").tools) == {"time_get"}
        assert "notes" not in dropped.view_for("s1").servers
        # ...and the epoch before the drop still shows it to s1.
        assert "notes_read" in catalog.view_for("s1").tools

        # Messages from the dropped session's actor, still winding down, are ignored.
        late = await h.feed(listed("notes", "read", "write", owner="s1"))
        assert set(late.view_for("s1").tools) == {"time_get"}


async def test_private_server_state_changes_do_not_touch_the_shared_view(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with running_router("time") as h:
        await h.feed(RegisterServer(ServerSpec("notes"), connection_mailbox(), owner="s1"))
        before = h.current
        after = await h.feed(listed("notes", "read", owner="s1"))
        assert after.servers == before.servers
        assert dict(after.tools) == dict(before.tools)
        assert after.listing == before.listing


# ---------------------------------------------------------------- waiting


async def test_wait_until_wakes_on_the_right_epoch(autojump_clock: trio.testing.MockClock) -> None:
    async with running_router("time") as h:
        start = h.current.epoch
        assert await h.cell.wait_until(lambda c: c.epoch >= start) is h.current  # current counts
        got: list[Catalog] = []

        async def waiter() -> None:
            got.append(await h.cell.wait_until(lambda c: c.epoch >= start + 2))

        async def steady_waiter() -> None:
            got.append(await h.cell.wait_until(lambda c: c.servers["time"].available))

        with trio.fail_after(WAIT_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiter)
                await trio.testing.wait_all_tasks_blocked()
                await h.feed(listed("time", "get"))
                assert got == []  # epoch start + 1: not yet
                await h.feed(moved("time", State.RESOLVE, State.IDLE))
                assert [c.epoch for c in got] == [start + 2]

                nursery.start_soon(steady_waiter)
                await h.walk("time", State.AUTHENTICATE, State.HANDSHAKE, State.LIST)
                assert len(got) == 1
                (steady,) = await h.walk("time", State.STEADY)
        assert got[1] is steady


# ---------------------------------------------------------------- relist reuse


async def test_a_relist_keeps_the_entries_of_unchanged_tools(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.router import tool_entries

    made: list[str] = []
    real = tool_entries.make_entry

    def counting(tool_id: str, *args: Any) -> Any:
        made.append(tool_id)
        return real(tool_id, *args)

    monkeypatch.setattr(tool_entries, "make_entry", counting)

    def tool(name: str, schema: dict[str, Any] | None = None, description: str = "") -> Tool:
        return Tool(name, description or f"{name} things", schema or {"type": "object"})

    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}}
    async with running_router("time") as h:
        first = await h.feed(ServerListed("time", 1, (tool("get"), tool("set", schema))))
        assert made == ["time_get", "time_set"]
        made.clear()
        again = await h.feed(ServerListed("time", 2, (tool("get"), tool("set", json_copy(schema)))))
        assert made == []
        assert again.tools["time_get"] is first.tools["time_get"]
        assert again.tools["time_set"] is first.tools["time_set"]
        assert again.search_index is first.search_index  # nothing to re-index
        assert again.servers["time"].generation == 2
        # 1 and true are equal to Python, not as JSON Schema (nor to the pin).
        changed = {"type": "object", "properties": {"n": {"type": "integer", "default": True}}}
        third = await h.feed(ServerListed("time", 3, (tool("get"), tool("set", changed))))
        assert made == ["time_set"]
        assert third.tools["time_get"] is first.tools["time_get"]
        assert third.tools["time_set"].fingerprint != first.tools["time_set"].fingerprint
        made.clear()
        renamed = (tool("get", description="new words"), tool("set", changed))
        fourth = await h.feed(ServerListed("time", 4, renamed))
        assert made == ["time_get"]
        assert fourth.tools["time_get"].description == "new words"
        assert [match.id for match in fourth.search_index.search("words", 5)] == ["time_get"]


async def test_a_private_servers_relist_keeps_the_entries_of_unchanged_tools(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.router import tool_entries

    made: list[str] = []
    real = tool_entries.make_entry

    def counting(tool_id: str, *args: Any) -> Any:
        made.append(tool_id)
        return real(tool_id, *args)

    monkeypatch.setattr(tool_entries, "make_entry", counting)
    async with running_router("time") as h:
        await h.feed(RegisterServer(ServerSpec("notes"), connection_mailbox(), owner="s1"))
        first = await h.feed(listed("notes", "read", "write", owner="s1"))
        assert made == ["notes_read", "notes_write"]
        made.clear()
        again = await h.feed(listed("notes", "read", "write", generation=2, owner="s1"))
        assert made == []
        assert again.view_for("s1").tools["notes_read"] is first.view_for("s1").tools["notes_read"]
        assert again.view_for("s1").servers["notes"].generation == 2
        changed = await h.feed(listed("notes", "read", "erase", generation=3, owner="s1"))
        assert made == ["notes_erase"]
        assert set(changed.view_for("s1").tools) == {"notes_read", "notes_erase"}


def json_copy(value: Any) -> Any:
    return json.loads(json.dumps(value))
