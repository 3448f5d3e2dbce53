"""``Session.subscribe`` / ``unsubscribe`` and ``resource_updates``
(``supervisor/sessions/subscriptions.py``): resolved like reads, sent to the right connection
actor, updates handed on with the URI as shown, everything left when the session ends."""

from __future__ import annotations

import trio
import trio.testing

from actors.connection.messages import ResourceUpdated, Subscribe, Unsubscribe
from actors.protocol.messages import ServerFeatures
from supervisor.sessions.subscriptions import ResourceUpdate
from tests.support.surface_fakes import FakeActor, surface_catalog, surface_session

PUBLISHED = {
    "fs1": {"resources": ["file:///notes.md", "file:///a.md"]},
    "fs2": {"resources": ["file:///notes.md"]},
}


async def test_updates_come_with_the_shown_uri_until_unsubscribed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    actors = {"fs1": FakeActor("fs1"), "fs2": FakeActor("fs2")}
    async with surface_session(actors, surface_catalog(actors, PUBLISHED)) as (session, _turn, _audit):
        shown = "mcp-supervisor://fs2/file:///notes.md"
        subscribed = await session.subscribe(shown)
        assert subscribed.ok and subscribed.tool == shown
        assert (await session.subscribe("file:///a.md")).ok
        assert (await session.subscribe(shown)).ok  # already: nothing sent again
        (to_fs2,) = actors["fs2"].seen
        assert isinstance(to_fs2, Subscribe)
        assert (to_fs2.uri, to_fs2.subscriber) == ("file:///notes.md", session.id)
        (to_fs1,) = actors["fs1"].seen
        assert isinstance(to_fs1, Subscribe) and to_fs1.uri == "file:///a.md"
        to_fs2.updates.send_nowait(ResourceUpdated("fs2", "file:///notes.md"))
        with trio.fail_after(1):
            update = await session.resource_updates.receive()
        assert update == ResourceUpdate(shown, "fs2", "file:///notes.md")
        left = await session.unsubscribe(shown)
        assert left.ok
        unsubscribe = actors["fs2"].seen[-1]
        assert isinstance(unsubscribe, Unsubscribe) and unsubscribe.reply is not None
        assert (unsubscribe.uri, unsubscribe.subscriber) == ("file:///notes.md", session.id)
        to_fs2.updates.send_nowait(ResourceUpdated("fs2", "file:///notes.md"))  # late: dropped
        to_fs1.updates.send_nowait(ResourceUpdated("fs1", "file:///a.md"))
        with trio.fail_after(1):
            update = await session.resource_updates.receive()
        assert update == ResourceUpdate("file:///a.md", "fs1", "file:///a.md")
        assert (await session.unsubscribe(shown)).text == f"not subscribed to {shown}"


async def test_a_session_that_ends_leaves_every_subscription(autojump_clock: trio.testing.MockClock) -> None:
    actors = {"fs1": FakeActor("fs1"), "fs2": FakeActor("fs2")}
    async with surface_session(actors, surface_catalog(actors, PUBLISHED)) as (session, _turn, _audit):
        assert (await session.subscribe("file:///notes.md", server="fs1")).ok
        assert (await session.subscribe("mcp-supervisor://fs2/file:///notes.md")).ok
        updates = session.resource_updates
        await trio.sleep(0.1)
        for actor in actors.values():
            assert isinstance(actor.seen[-1], Subscribe)
        ended_at = trio.current_time()
    for actor in actors.values():
        leave = actor.seen[-1]
        assert isinstance(leave, Unsubscribe)
        assert (leave.uri, leave.subscriber, leave.reply) == ("file:///notes.md", session.id, None)
    with trio.fail_after(1):
        assert [update async for update in updates] == []  # the channel ended with the session
    assert trio.current_time() - ended_at < 1


async def test_subscriptions_are_refused_where_they_cannot_go() -> None:
    actors = {"fs1": FakeActor("fs1"), "fs2": FakeActor("fs2")}
    features = {"fs2": ServerFeatures(resources=True)}  # no subscribe
    catalog = surface_catalog(actors, PUBLISHED, features=features)
    async with surface_session(actors, catalog) as (session, _turn, _audit):
        unsupported = await session.subscribe("mcp-supervisor://fs2/file:///notes.md")
        assert unsupported.error is not None and unsupported.error.code == "unsupported"
        unknown = await session.subscribe("file:///nowhere")
        assert unknown.error is not None and unknown.error.code == "unknown_resource"
        assert actors["fs1"].seen == [] and actors["fs2"].seen == []


async def test_subscribe_resolves_against_the_sessions_current_catalog() -> None:
    actors = {"fs1": FakeActor("fs1"), "fs2": FakeActor("fs2")}
    first = surface_catalog({"fs1": actors["fs1"]}, {"fs1": {"resources": ["file:///notes.md"]}})
    later = surface_catalog(actors, PUBLISHED)
    async with surface_session(actors, first) as (session, _turn, _audit):
        before = await session.subscribe("mcp-supervisor://fs2/file:///notes.md")
        assert before.error is not None and before.error.code == "unknown_resource"
        session._services.catalog.current = later  # a new epoch: fs2 is there now
        assert (await session.subscribe("mcp-supervisor://fs2/file:///notes.md")).ok
        assert isinstance(actors["fs2"].seen[0], Subscribe)
