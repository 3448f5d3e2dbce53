"""The per-request era's ``subscriptions/listen`` on a duplex transport
(``actors/connection/listener.py``): the connection actor over a scripted stdio-framed
server (``tests/support/fakes.py``), on Trio's MockClock (autojump)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from actors.connection.messages import ServerListed
from actors.connection.states import State
from actors.protocol.listen import REOPEN_AFTER_S, SUBSCRIPTION_ID
from actors.protocol.messages import META_PROTOCOL_VERSION, Request
from tests.actors.connection.test_connection_actor import Harness, running
from tests.support.fakes import MODERN_DISCOVER, FakeServer

CHANGED = "notifications/tools/list_changed"


def modern_server() -> FakeServer:
    server = FakeServer()
    server.discover = MODERN_DISCOVER
    return server


def listens(server: FakeServer) -> list[Request]:
    return [m for m in server.received if isinstance(m, Request) and m.method == "subscriptions/listen"]


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": name, "inputSchema": {"type": "object"}}


async def listed_with(h: Harness, name: str) -> ServerListed:
    message = await h.wait_for(lambda m: isinstance(m, ServerListed) and name in {t.name for t in m.tools})
    assert isinstance(message, ServerListed)
    return message


async def test_list_changes_come_on_the_listen_request_matched_by_its_subscription_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Over stdio, a server of the per-request era that offers tool changes is sent
    ``subscriptions/listen`` (it used to be sent nothing, and its changes were never
    heard); a change stamped with its id is read, one stamped with another id is not."""
    server = modern_server()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        await trio.sleep(0.1)
        [listen] = listens(server)
        assert isinstance(listen.params, dict)
        assert listen.params["notifications"] == {"toolsListChanged": True}
        assert listen.params["_meta"][META_PROTOCOL_VERSION] == "2026-07-28"
        session = server.current
        assert session.listens == [listen.id]
        server.tools.append(tool("stray"))
        await session.notify(CHANGED, {"_meta": {SUBSCRIPTION_ID: "someone-else"}})
        await trio.sleep(1.0)
        assert server.list_calls == 1  # not ours: nothing read
        server.tools.append(tool("fresh"))
        await session.notify_listeners(CHANGED)
        await listed_with(h, "fresh")
        assert server.list_calls == 2
        assert len(server.connect_times) == 1 and State.BACKOFF not in h.states()  # a relist


async def test_a_server_that_refuses_listen_stays_steady_and_is_relisted_when_its_ttl_runs_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = modern_server()
    server.listen = "refuse"  # -32601
    server.list_extra = {"ttlMs": 30_000}
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        start = trio.current_time()
        server.tools.append(tool("fresh"))
        await listed_with(h, "fresh")
        assert 29.0 < trio.current_time() - start < 31.0  # read again when the ttlMs ran out
        assert len(listens(server)) == 1  # refused once: not asked again
        assert State.BACKOFF not in h.states()


@pytest.mark.parametrize("cancel", [False, True], ids=["answered", "cancelled"])
async def test_a_listen_request_the_server_ended_is_sent_again_and_every_list_read_again(
    autojump_clock: trio.testing.MockClock, cancel: bool
) -> None:
    """A subscription the server ended (its result, or ``notifications/cancelled``
    naming it) is asked for again after a second; once the new one is acknowledged,
    what changed in between went unheard, so ``server/discover`` is asked again and
    the lists are read again (a graceful restart looks like this)."""
    server = modern_server()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        await trio.sleep(0.1)
        server.tools.append(tool("meanwhile"))  # a change nobody announced
        ended = trio.current_time()
        await server.current.end_listens(cancel=cancel)
        await listed_with(h, "meanwhile")
        assert REOPEN_AFTER_S <= trio.current_time() - ended < REOPEN_AFTER_S + 0.5
        assert len(listens(server)) == 2
        assert server.methods().count("server/discover") == 2
        assert len(server.connect_times) == 1  # the same connection
        assert State.BACKOFF not in h.states()


async def test_a_new_discover_answer_brings_its_features(autojump_clock: trio.testing.MockClock) -> None:
    server = modern_server()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        await trio.sleep(0.1)
        server.discover = {**MODERN_DISCOVER, "capabilities": {"tools": {"listChanged": True}, "prompts": {}}}
        server.answers["prompts/list"] = lambda request: {"prompts": [{"name": "hello"}]}
        await server.current.end_listens()
        message = await h.wait_for(lambda m: isinstance(m, ServerListed) and bool(m.prompts))
        assert isinstance(message, ServerListed) and message.features.prompts


async def test_three_listen_requests_ended_unacknowledged_in_a_row_lose_the_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A subscription that ended is asked for again; when three attempts in a row end
    before they were acknowledged, the connection counts as lost (backoff), as a
    listen stream over HTTP that cannot be reopened does."""
    server = modern_server()
    async with running(server) as h:
        await h.wait_state(State.STEADY)
        await trio.sleep(0.1)
        server.listen = "fail"  # -32603, no acknowledgement
        ended = trio.current_time()
        await server.current.end_listens()
        backoff = await h.wait_state(State.BACKOFF)
        assert len(listens(server)) == 4  # the one that worked, and three that did not
        assert 3 * REOPEN_AFTER_S <= trio.current_time() - ended < 3 * REOPEN_AFTER_S + 0.5
        assert backoff.reason == (
            "mcp server fake: subscriptions/listen answered with error -32603: Subscription limit "
            "reached before it was acknowledged, 3 times in a row"
        )
        server.listen = "hold"
        await h.wait_state(State.STEADY, count=2)  # and it comes back on the schedule
