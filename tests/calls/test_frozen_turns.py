"""A turn is frozen, availability included (docs/turns.md): a server down when it began
stays unavailable in it, an idle one is available on demand, and a call names only a
tool the turn shows. Through ``Supervisor.open`` with fake servers on virtual time."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from actors.connection.messages import Control
from actors.connection.states import Availability, State
from actors.spec import Start
from tests.calls.test_catalog_epochs import BOUND_S, fake, in_state, running, tool, until
from tests.support.fakes import FakeServer

# ------------------------------------------------------------- availability


async def test_a_server_down_when_the_turn_began_stays_unavailable_in_it(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([tool("echo", "Echo text back")])
    async with running({"fake": server}, (fake("fake"),), tmp_path) as sup, sup.session() as session:
        await until(sup, in_state("fake", State.STEADY))
        server.fail_connect = True
        await server.current.close()  # the connection dies; every retry fails for now
        await until(sup, in_state("fake", State.BACKOFF))
        turn = await session.begin_turn()
        assert turn.availability("fake_echo") is Availability.UNAVAILABLE
        assert not turn.is_available("fake_echo")
        (item,) = turn.listing()
        assert (item["available"], item["availability"]) == (False, "unavailable")

        server.fail_connect = False  # it comes back while the turn runs
        await until(sup, in_state("fake", State.STEADY))
        refused = await turn.call("fake_echo", {"text": "hi"})
        assert refused.error is not None and refused.error.code == "unavailable", refused
        assert refused.error.message == (
            "mcp server fake is unavailable in this turn (backoff when it began); "
            "a later turn sees it once it is back"
        )
        assert server.calls() == []  # nobody was asked

        later = await session.begin_turn()
        assert later.availability("fake_echo") is Availability.AVAILABLE
        assert (await later.call("fake_echo", {"text": "hi"})).ok
        await sup.store.flush()
        rows = sup.store.store.audit_rows(session=session.id)
        assert sorted((r.outcome, r.decision) for r in rows) == [("ok", "allow"), ("unavailable", "none")]


async def test_a_disabled_server_enabled_mid_turn_stays_unavailable_in_it(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([tool("echo", "Echo text back")])
    spec = fake("fake", start=Start.LAZY)
    async with running({"fake": server}, (spec,), tmp_path) as sup, sup.session() as session:
        await session.begin_turn()  # starts it
        await until(sup, in_state("fake", State.STEADY))
        await sup.command("fake", Control.DISABLE)
        await until(sup, in_state("fake", State.DISABLED))
        turn = await session.begin_turn()
        await sup.command("fake", Control.ENABLE)  # back to idle: a call would start it
        await until(sup, in_state("fake", State.IDLE))
        refused = await turn.call("fake_echo", {"text": "hi"})
        assert refused.error is not None and refused.error.code == "unavailable", refused
        assert len(server.sessions) == 1  # not started again for that turn
        later = await session.begin_turn()
        assert (await later.call("fake_echo", {"text": "hi"})).ok


async def test_an_idle_server_is_available_on_demand(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    server = FakeServer([tool("echo", "Echo text back")])
    spec = fake("fake", start=Start.LAZY)
    async with running({"fake": server}, (spec,), tmp_path, search=True) as sup, sup.session() as session:
        await session.begin_turn()  # its tools are unknown: the turn starts it
        await until(sup, in_state("fake", State.STEADY))
        await sup.command("fake", Control.DISABLE)
        await until(sup, in_state("fake", State.DISABLED))
        await sup.command("fake", Control.ENABLE)
        await until(sup, in_state("fake", State.IDLE))
        turn = await session.begin_turn()  # tools known: nothing is started
        assert sup.servers()["fake"].state is State.IDLE
        (match,) = turn.search("echo")["matches"]
        assert (match["availability"], match["server_state"]) == ("on_demand", "idle")
        with trio.fail_after(BOUND_S):
            result = await turn.call("fake_echo", {"text": "hi"})  # the call starts it
        assert result.ok, result


# ----------------------------------------------------- what a call may name


async def test_with_search_on_a_call_names_only_what_the_turn_shows(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    tools = [tool(f"thing_{n}", f"Handles thing number {n}") for n in range(25)]
    server = FakeServer(tools)
    async with (
        running({"fake": server}, (fake("fake"),), tmp_path, search=True) as sup,
        sup.session(pinned=["fake_thing_1"]) as session,
    ):
        await until(sup, in_state("fake", State.STEADY))
        turn = await session.begin_turn()
        assert (await turn.call("fake_thing_1", {})).ok  # pinned: listed
        hidden = await turn.call("fake_thing_3", {})  # in the catalog, but not shown
        assert hidden.error is not None and hidden.error.code == "unknown_tool"
        assert hidden.error.message == (
            "unknown tool fake_thing_3: this turn does not show it; call tool_search to find it"
        )
        assert turn.search("thing number 3")["matches"][0]["id"] == "fake_thing_3"
        assert (await turn.call("fake_thing_3", {})).ok  # returned by a search in this turn

        # Activated before a turn began: shown. Activated by another turn meanwhile: not.
        first, second = await session.begin_turn(), await session.begin_turn()
        assert (await first.call("fake_thing_3", {})).ok
        second.search("thing number 7")
        late = await first.call("fake_thing_7", {})
        assert late.error is not None and late.error.code == "unknown_tool"
        assert "fake_thing_7" not in [t.id for t in first.tools]
        assert (await second.call("fake_thing_7", {})).ok
        assert (await (await session.begin_turn()).call("fake_thing_7", {})).ok
        assert [c.params["name"] for c in server.calls()] == ["thing_1", "thing_3", "thing_3"] + [
            "thing_7"
        ] * 2
