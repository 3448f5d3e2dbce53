"""The reference counting of a tenant's resource subscriptions among its new-era
listen streams (``supervisor/gateway/fanout.py``): ``Interests`` alone, then
``ResourceFanout`` over a scripted session on Trio's MockClock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import cast

import attrs
import pytest
import trio
import trio.testing

from supervisor.gateway.fanout import Interests, ResourceFanout
from supervisor.sessions.session import Session
from supervisor.sessions.subscriptions import ResourceUpdate


def test_the_first_stream_to_want_a_uri_is_told_so_and_the_last_to_end_gets_it_back() -> None:
    interests = Interests()
    assert interests.add("s1", "a://x") is True
    assert interests.add("s1", "a://x") is False  # the same stream twice counts once
    assert interests.add("s2", "a://x") is False
    assert interests.add("s2", "b://y") is True
    assert interests.wants("s1", "a://x") and not interests.wants("s1", "b://y")
    assert interests.drop("s1") == []  # s2 still wants a://x
    assert interests.wanted("a://x")
    assert interests.drop("s2") == ["a://x", "b://y"]
    assert not interests.wanted("a://x") and not interests.wanted("b://y")
    assert interests.drop("s2") == []  # a stream that ended twice
    assert interests.add("s3", "a://x") is True  # wanted afresh


@attrs.define
class Answer:
    ok: bool


class ScriptedSession:
    """What the fanout uses of a ``Session``, which it mimics: a subscription it holds
    already (or is asking for) is answered ok at once, one refused is not held. Every
    subscribe and unsubscribe is noted, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.held: set[str] = set()
        self.refuse: set[str] = set()
        self.hold: dict[str, trio.Event] = {}  # a subscribe waits for its event
        self.send, self.updates = trio.open_memory_channel[ResourceUpdate](10)

    async def subscribe(self, uri: str) -> Answer:
        self.calls.append(f"+{uri}")
        if uri in self.held:
            return Answer(True)  # "subscribed already"
        self.held.add(uri)
        if uri in self.hold:
            await self.hold[uri].wait()
        if uri in self.refuse:
            self.held.discard(uri)
            return Answer(False)
        return Answer(True)

    async def unsubscribe(self, uri: str) -> Answer:
        self.calls.append(f"-{uri}")
        self.held.discard(uri)
        await trio.sleep(0.1)
        return Answer(True)

    @property
    def resource_updates(self) -> AsyncIterator[ResourceUpdate]:
        return self.updates.__aiter__()


def fanout_of(session: ScriptedSession) -> ResourceFanout:
    return ResourceFanout(cast(Session, session))


def channel() -> tuple[trio.MemorySendChannel[ResourceUpdate], trio.MemoryReceiveChannel[ResourceUpdate]]:
    return trio.open_memory_channel[ResourceUpdate](10)


async def test_one_session_subscription_serves_every_stream_and_updates_reach_only_those_that_want_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    session = ScriptedSession()
    session.refuse.add("gone://z")
    fanout = fanout_of(session)
    (s1, r1), (s2, r2) = channel(), channel()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fanout.run)
        assert await fanout.join(1, ["a://x", "a://x", "gone://z"], s1) == ["a://x"]
        assert await fanout.join(2, ["a://x", "b://y"], s2) == ["a://x", "b://y"]
        assert session.calls == ["+a://x", "+gone://z", "+b://y"]
        await session.send.send(ResourceUpdate("b://y", "srv", "b://y"))
        await session.send.send(ResourceUpdate("a://x", "srv", "a://x"))
        with trio.fail_after(1):
            assert (await r2.receive()).uri == "b://y"
            assert (await r2.receive()).uri == "a://x"
            assert (await r1.receive()).uri == "a://x"
        with pytest.raises(trio.WouldBlock):
            r1.receive_nowait()  # b://y went to the stream that wanted it only
        await fanout.leave(1)
        assert session.calls[3:] == []  # stream 2 still wants a://x
        await fanout.leave(2)
        assert session.calls[3:] == ["-a://x", "-b://y"]
        nursery.cancel_scope.cancel()


async def test_a_stream_that_hangs_up_while_joining_leaves_what_it_had_joined(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The client hangs up while the session subscribes to its second URI: the first
    one is left again (it used to stay subscribed until the tenant's session ended)."""
    session = ScriptedSession()
    session.hold["b://y"] = trio.Event()
    fanout = fanout_of(session)
    send, _ = channel()
    with trio.move_on_after(1):
        try:
            await fanout.join(1, ["a://x", "b://y"], send)
        finally:
            with trio.CancelScope(shield=True):
                await fanout.leave(1)
    assert session.calls == ["+a://x", "+b://y", "-a://x"]


async def test_a_stream_that_joins_while_another_is_refused_the_uri_is_not_told_it_has_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The second stream waits for the first one's subscribe and asks again (it used
    to be agreed at once, by the session's "subscribed already", and then heard
    nothing when the first was refused)."""
    session = ScriptedSession()
    session.refuse.add("a://x")
    session.hold["a://x"] = trio.Event()
    fanout = fanout_of(session)
    send, _ = channel()
    agreed: dict[int, list[str]] = {}

    async def join(stream: int) -> None:
        agreed[stream] = await fanout.join(stream, ["a://x"], send)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(join, 1)
        await trio.sleep(0.1)
        nursery.start_soon(join, 2)
        await trio.sleep(0.1)
        session.hold["a://x"].set()
    assert agreed == {1: [], 2: []}
    assert session.calls == ["+a://x", "+a://x"]


async def test_a_stream_that_joins_while_the_last_one_leaves_keeps_the_uri_subscribed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Stream 1 leaves ``a://x`` while stream 2 waits to join it: whether to unsubscribe
    is decided when the leave's turn comes, and by then stream 2 has it."""
    session = ScriptedSession()
    fanout = fanout_of(session)
    send, _ = channel()
    await fanout.join(1, ["a://x"], send)
    session.hold["b://y"] = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fanout.join, 3, ["b://y"], send)  # holds the lock a while
        await trio.sleep(0.1)
        nursery.start_soon(fanout.join, 2, ["a://x"], send)  # waits its turn
        await trio.sleep(0.1)
        nursery.start_soon(fanout.leave, 1)  # a://x counted as nobody's, then waits too
        await trio.sleep(0.1)
        session.hold["b://y"].set()
    assert "-a://x" not in session.calls and session.held == {"a://x", "b://y"}
