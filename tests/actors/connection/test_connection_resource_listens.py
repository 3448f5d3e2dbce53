"""Resource subscriptions on a connection of the 2026-07-28 era
(``actors/connection/resource_listens.py``): one ``subscriptions/listen`` per URI,
held open while the URI has subscribers, over a scripted stdio-framed server on
Trio's MockClock (autojump)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from actors.connection.messages import Answered, CallFailed, ResourceUpdated
from actors.connection.states import State
from actors.protocol.listen import REOPEN_AFTER_S
from actors.protocol.messages import Request
from tests.actors.connection.test_connection_actor import Harness, running
from tests.actors.connection.test_connection_surface import sent, subscribe, surface_server, unsubscribe
from tests.actors.transports.test_stdio_transport import eventually
from tests.support.fakes import MODERN_DISCOVER, FakeServer

URI = "file:///notes.txt"
CANCELLED = "notifications/cancelled"


def modern_surface_server(**capabilities: Any) -> FakeServer:
    """``surface_server``'s features, spoken in the per-request era."""
    server = surface_server(**capabilities)
    server.discover = {**MODERN_DISCOVER, "capabilities": server.capabilities}
    return server


def resource_listens(server: FakeServer) -> list[Request]:
    """The listen requests that asked for resource updates, in order."""
    return [
        m
        for m in sent(server, "subscriptions/listen")
        if isinstance(m.params, dict) and "resourceSubscriptions" in m.params["notifications"]
    ]


def cancelled(server: FakeServer) -> list[Any]:
    return [(m.params or {}).get("requestId") for m in server.notifications(CANCELLED)]  # type: ignore[union-attr]


async def steady(h: Harness) -> None:
    await h.wait_state(State.STEADY)
    await trio.sleep(0.1)  # the list changes' listen request is out


async def test_the_first_subscriber_opens_a_listen_for_the_uri_and_the_last_one_cancels_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = modern_surface_server()
    async with running(server) as h:
        await steady(h)
        first, ada = await subscribe(h, URI, "ada")
        second, bob = await subscribe(h, URI, "bob")
        assert first == second == Answered({})
        [listen] = resource_listens(server)
        assert isinstance(listen.params, dict)
        assert listen.params["notifications"] == {"resourceSubscriptions": [URI]}
        assert sent(server, "resources/subscribe") == []  # the era has none
        await server.current.update(URI)
        with trio.fail_after(1):
            assert await ada.receive() == ResourceUpdated("fake", URI)
            assert await bob.receive() == ResourceUpdated("fake", URI)

        assert await unsubscribe(h, URI, "ada") == Answered({})
        assert cancelled(server) == []
        assert await unsubscribe(h, URI, "bob") == Answered({})
        with trio.fail_after(1):
            await eventually(lambda: cancelled(server) == [listen.id])
        assert listen.id not in server.current.listens
        assert sent(server, "resources/unsubscribe") == []
        assert server.list_calls == 1  # its acknowledgement was no reason to read the lists again
        assert h.actor.state is State.STEADY


async def test_each_uri_has_a_listen_of_its_own_and_leaving_one_keeps_the_other(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = modern_surface_server()
    other = "mem://b"
    async with running(server) as h:
        await steady(h)
        _, ada = await subscribe(h, URI, "ada")
        _, bob = await subscribe(h, other, "bob")
        notes, mem = resource_listens(server)
        assert await unsubscribe(h, URI, "ada") == Answered({})
        with trio.fail_after(1):
            await eventually(lambda: cancelled(server) == [notes.id])
        await server.current.update(other)
        await server.current.update(URI)  # nobody listens for it any more: the fake sends nothing
        with trio.fail_after(1):
            assert await bob.receive() == ResourceUpdated("fake", other)
        assert mem.id in server.current.listens
        with pytest.raises(trio.WouldBlock):
            ada.receive_nowait()


async def test_listens_are_opened_again_after_a_reconnect(autojump_clock: trio.testing.MockClock) -> None:
    server = modern_surface_server()
    async with running(server, reconnect_schedule_s=(1.0,)) as h:
        await steady(h)
        outcome, updates = await subscribe(h, URI, "ada")
        assert outcome == Answered({})
        await server.current.close()
        await h.wait_state(State.STEADY, count=2)
        with trio.fail_after(5):
            await eventually(lambda: len(resource_listens(server)) == 2)
            await eventually(lambda: len(server.current.listens) == 2)  # list changes, and the URI's
        await server.current.update(URI)
        with trio.fail_after(1):
            assert await updates.receive() == ResourceUpdated("fake", URI)


async def test_a_listen_the_server_ends_is_sent_again(autojump_clock: trio.testing.MockClock) -> None:
    server = modern_surface_server()
    async with running(server) as h:
        await steady(h)
        _, updates = await subscribe(h, URI, "ada")
        await server.current.end_listens(cancel=True)  # the list changes' one too
        with trio.fail_after(REOPEN_AFTER_S + 1):
            await eventually(lambda: len(resource_listens(server)) == 2)
            await eventually(lambda: len(server.current.listens) == 2)
        await server.current.update(URI)
        with trio.fail_after(1):
            assert await updates.receive() == ResourceUpdated("fake", URI)
        assert len(server.connect_times) == 1


async def test_an_acknowledgement_that_leaves_the_uri_out_refuses_the_subscription(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = modern_surface_server()
    server.honor_uris = False
    async with running(server) as h:
        await steady(h)
        outcome, _ = await subscribe(h, URI, "ada")
        assert isinstance(outcome, CallFailed) and outcome.code == "unsupported"
        assert f"did not agree to send updates of {URI}" in outcome.message
        [listen] = resource_listens(server)
        with trio.fail_after(1):
            await eventually(lambda: cancelled(server) == [listen.id])
        assert h.actor._subscriptions.subscribers(URI) == ()


async def test_a_listen_refused_before_its_acknowledgement_refuses_the_subscription(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = modern_surface_server()
    async with running(server) as h:
        await steady(h)
        server.listen = "fail"
        outcome, _ = await subscribe(h, URI, "ada")
        assert isinstance(outcome, CallFailed) and outcome.code == "server_error"
        assert "answered with error -32603: Subscription limit reached" in outcome.message
        assert h.actor._subscriptions.subscribers(URI) == ()
        assert h.actor.state is State.STEADY


async def test_a_server_that_does_not_declare_subscriptions_is_not_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = modern_surface_server(resources={"listChanged": True})
    async with running(server) as h:
        await steady(h)
        outcome, _ = await subscribe(h, URI, "ada")
        assert isinstance(outcome, CallFailed) and outcome.code == "unsupported"
        assert resource_listens(server) == []
