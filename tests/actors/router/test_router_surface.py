"""The router folds each server's resources, templates and prompts into the catalog:
prompt ids, shown URIs (the URI rule across servers), cut descriptions, epochs that
move only when the surface does, and per-session overlays."""

from __future__ import annotations

import attrs
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.connection.messages import ServerListed
from actors.connection.states import Availability, State
from actors.protocol.messages import Prompt, Resource, ResourceTemplate, ServerFeatures, Tool
from actors.router.actor import (
    AddServer,
    RegisterServer,
    RemoveServer,
    RetuneServers,
    RouterActor,
    RouterMessage,
)
from actors.router.catalog import ServerView
from actors.router.surface import SurfaceBook
from actors.router.uris import qualify, shown_uris
from actors.spec import ServerSpec
from tests.actors.router.test_router import UP, connection_mailbox, moved, running_router

FEATURES = ServerFeatures(resources=True, templates=True, prompts=True, subscribe=True)


def surface(
    server: str,
    *,
    uris: tuple[str, ...] = (),
    templates: tuple[str, ...] = (),
    prompts: tuple[str, ...] = (),
    tools: tuple[str, ...] = ("t",),
    description: str = "about it",
    owner: str | None = None,
    generation: int = 1,
) -> ServerListed:
    """A fresh listing (new objects every time, like a real relist)."""
    return ServerListed(
        server,
        generation,
        tuple(Tool(name) for name in tools),
        owner=owner,
        resources=tuple(
            Resource(u, u.rsplit("/", 1)[-1], {"uri": u, "name": "n", "description": description})
            for u in uris
        ),
        templates=tuple(ResourceTemplate(t, "tpl", {"uriTemplate": t, "name": "tpl"}) for t in templates),
        prompts=tuple(
            Prompt(
                p,
                ("topic",),
                ("topic",),
                {"name": p, "description": description, "arguments": [{"name": "topic"}]},
            )
            for p in prompts
        ),
        features=FEATURES,
    )


async def test_prompts_are_namespaced_and_uris_shown_as_they_are(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with running_router("docs", "notes") as h:
        await h.feed(
            surface("docs", uris=("demo://a", "demo://b"), templates=("demo://t/{id}",), prompts=("simple",)),
            surface("notes", uris=("file:///n.md",), prompts=("simple", "with args")),
        )
        catalog = (await h.walk("docs", *UP))[-1]
        assert list(catalog.prompts) == ["docs_simple", "notes_simple", "notes_with_args"]
        entry = catalog.prompts["notes_with_args"]
        assert (entry.server, entry.name, entry.arguments, entry.required) == (
            "notes",
            "with args",
            ("topic",),
            ("topic",),
        )
        assert list(catalog.resources) == ["demo://a", "demo://b", "file:///n.md"]
        assert catalog.resources["file:///n.md"].server_uri == "file:///n.md"
        assert catalog.resources["demo://a"].raw["description"] == "about it"
        assert list(catalog.templates) == ["demo://t/{id}"]
        assert catalog.servers["docs"].features == FEATURES
        assert catalog.servers["docs"].resources[0].uri == "demo://a"
        # The surface follows its server's availability like tools do: still listed,
        # the server's view says whether a turn may reach it.
        assert catalog.servers["docs"].availability is Availability.AVAILABLE
        assert catalog.servers["notes"].availability is Availability.ON_DEMAND
        down = await h.feed(moved("docs", State.BACKOFF, State.STEADY))
        assert "docs_simple" in down.prompts and "demo://a" in down.resources
        assert down.servers["docs"].availability is Availability.UNAVAILABLE


async def test_a_uri_two_servers_publish_is_qualified_for_both_and_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with running_router("fs1", "fs2", "other") as h:
        both = await h.feed(
            surface("fs1", uris=("file:///a.md", "file:///only1"), templates=("file:///{path}",)),
            surface("fs2", uris=("file:///a.md",), templates=("file:///{path}",)),
            surface("other", uris=("demo://x",)),
        )
        assert list(both.resources) == [
            qualify("fs1", "file:///a.md"),
            "file:///only1",
            qualify("fs2", "file:///a.md"),
            "demo://x",
        ]
        assert both.resources[qualify("fs2", "file:///a.md")].server_uri == "file:///a.md"
        assert set(both.templates) == {qualify("fs1", "file:///{path}"), qualify("fs2", "file:///{path}")}

        # fs2 stops publishing it: fs1's entry is shown as it is again.
        alone = await h.feed(
            surface("fs2", uris=("file:///b.md",), templates=("file:///{path}",), generation=2)
        )
        assert alone.epoch == both.epoch + 1
        assert list(alone.resources) == ["file:///a.md", "file:///only1", "file:///b.md", "demo://x"]
        assert alone.resources["file:///a.md"].server == "fs1"

        # A server that leaves re-shows the others; one that joins qualifies them again.
        gone = await h.feed(RemoveServer("fs1"))
        assert list(gone.templates) == ["file:///{path}"]
        assert gone.templates["file:///{path}"].server == "fs2"
        await h.feed(AddServer(ServerSpec("fs3"), connection_mailbox()))
        joined = await h.feed(surface("fs3", uris=("file:///b.md",)))
        assert set(joined.resources) == {
            qualify("fs2", "file:///b.md"),
            qualify("fs3", "file:///b.md"),
            "demo://x",
        }
        # Old catalogs never change.
        assert next(iter(both.resources)) == qualify("fs1", "file:///a.md")


async def test_the_epoch_moves_only_when_the_surface_does(autojump_clock: trio.testing.MockClock) -> None:
    async with running_router("docs", "other") as h:
        first = await h.feed(surface("docs", uris=("demo://a",), templates=("demo://{x}",), prompts=("p",)))
        again = await h.feed(surface("docs", uris=("demo://a",), templates=("demo://{x}",), prompts=("p",)))
        assert again.epoch == first.epoch  # an identical relist
        assert again.resources is first.resources and again.prompts is first.prompts

        # A tool-list change of another server leaves the surface maps as they are.
        tools_only = await h.feed(surface("other", tools=("a", "b")))
        assert tools_only.epoch == first.epoch + 1
        assert tools_only.resources is first.resources and tools_only.templates is first.templates

        described = await h.feed(
            surface("docs", uris=("demo://a",), templates=("demo://{x}",), prompts=("p",), description="new")
        )
        assert described.epoch == tools_only.epoch + 1
        assert described.prompts["docs_p"].description == "new"
        featured = await h.feed(
            attrs.evolve(
                surface(
                    "docs", uris=("demo://a",), templates=("demo://{x}",), prompts=("p",), description="new"
                ),
                features=ServerFeatures(),
            )
        )
        assert featured.epoch == described.epoch + 1


async def test_untrusted_descriptions_are_cut_trusted_ones_are_not(
    autojump_clock: trio.testing.MockClock,
) -> None:
    long = "x" * 300
    async with running_router("docs") as h:
        catalog = await h.feed(surface("docs", uris=("demo://a",), prompts=("p",), description=long))
        prompt, resource = catalog.prompts["docs_p"], catalog.resources["demo://a"]
        assert len(prompt.description) == 200 and prompt.description.endswith("…")
        assert prompt.raw["description"] == prompt.description
        assert prompt.raw["arguments"] == [{"name": "topic"}]  # the rest as sent
        assert resource.raw["description"] == prompt.description
        assert resource.raw["uri"] == "demo://a"

        trusted = await h.feed(RetuneServers((ServerSpec("docs", trusted=True),), 200))
        assert trusted.epoch == catalog.epoch + 1
        assert trusted.prompts["docs_p"].description == long
        assert trusted.resources["demo://a"].raw["description"] == long


async def test_private_servers_show_their_surface_to_their_owner_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with running_router("fs") as h:
        await h.feed(surface("fs", uris=("file:///a.md", "file:///b.md"), prompts=("p",)))
        await h.feed(RegisterServer(ServerSpec("mine"), connection_mailbox(), owner="s1"))
        catalog = await h.feed(
            surface("mine", uris=("file:///a.md",), templates=("mine://{x}",), prompts=("p",), owner="s1")
        )

        assert list(catalog.resources) == ["file:///a.md", "file:///b.md"]
        assert list(catalog.view_for("s2").resources) == ["file:///a.md", "file:///b.md"]
        view = catalog.view_for("s1")
        assert view is catalog.view_for("s1")
        # The URI rule is applied again over shared and private pairs.
        assert list(view.resources) == [
            qualify("fs", "file:///a.md"),
            "file:///b.md",
            qualify("mine", "file:///a.md"),
        ]
        assert view.resources[qualify("fs", "file:///a.md")].server == "fs"
        assert view.resources["file:///b.md"] is catalog.resources["file:///b.md"]
        assert list(view.prompts) == ["fs_p", "mine_p"]
        assert view.templates["mine://{x}"].server == "mine"

        relisted = await h.feed(
            surface(
                "mine",
                uris=("file:///a.md",),
                templates=("mine://{x}",),
                prompts=("p",),
                owner="s1",
                generation=2,
            )
        )
        assert relisted.epoch == catalog.epoch  # the same surface again


async def test_items_listed_twice_keep_the_first_and_say_so(autojump_clock: trio.testing.MockClock) -> None:
    async with running_router("docs") as h:
        listing = surface("docs", uris=("demo://a", "demo://a"), prompts=("p", "p"))
        catalog = await h.feed(listing)
        assert list(catalog.resources) == ["demo://a"] and list(catalog.prompts) == ["docs_p"]
        problems = catalog.servers["docs"].problems
        assert "resource 'demo://a' is listed twice by docs; the first one is kept" in problems
        assert "prompt 'p' is listed twice by docs; the first one is kept" in problems


async def test_prompt_ids_have_their_own_book(autojump_clock: trio.testing.MockClock) -> None:
    async with running_router("a", "a_b") as h:
        catalog = await h.feed(
            surface("a", tools=("b_c",), prompts=("b_c",)), surface("a_b", tools=("x",), prompts=("c",))
        )
        # The two prompt pairs collide after sanitizing, so both get a hash...
        assert len(catalog.prompts) == 2 and "a_b_c" not in catalog.prompts
        assert {e.server for e in catalog.prompts.values()} == {"a", "a_b"}
        # ...which touches no tool id: the tools do not collide with each other.
        assert set(catalog.tools) == {"a_b_c", "a_b_x"}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["s1", "s2", "s3"]),
            st.lists(st.sampled_from(["u1", "u2", "u3", "mcp-supervisor://s1/u1"]), max_size=3, unique=True),
        ),
        max_size=12,
    )
)
def test_the_book_agrees_with_the_rule_over_all_pairs(changes: list[tuple[str, list[str]]]) -> None:
    """One server at a time gives what the URI rule gives over every pair at once."""
    book, published = SurfaceBook(), {}
    for server, uris in changes:
        view = ServerView(server, ServerSpec(server), connection_mailbox())
        view = attrs.evolve(view, resources=tuple(Resource(u, u) for u in uris))
        if uris or server not in published:
            book.put(view, 200)
            published[server] = uris
        else:
            book.drop(server, 200)
            del published[server]
        expected = shown_uris((s, u) for s in ("s1", "s2", "s3") for u in published.get(s, ()))
        _prompts, resources, _templates = book.maps(["s1", "s2", "s3"])
        assert {(e.server, e.server_uri): e.uri for e in resources.values()} == expected


async def test_a_cached_listing_shows_its_surface_stale_until_the_server_lists_and_the_sink_gets_each_listing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The store's copy of a lazy server's last listing: its resources, prompts and
    features are in the catalog before it starts (stale, like its tools); its own
    listing replaces them, and the listing sink (the store) is told that one whole."""
    send, receive = trio.open_memory_channel[RouterMessage](64)
    sunk: list[ServerListed] = []
    cached = surface("docs", uris=("demo://a",), prompts=("simple",), generation=0)
    router = RouterActor(
        [(ServerSpec("docs"), connection_mailbox())],
        receive,
        cached={"docs": cached},
        listing_sink=sunk.append,
    )
    view = router.cell.current.servers["docs"]
    assert view.cached_only and view.features == FEATURES
    assert list(router.cell.current.resources) == ["demo://a"] and list(router.cell.current.prompts) == [
        "docs_simple"
    ]
    async with trio.open_nursery() as nursery:
        await nursery.start(router.run)
        fresh = surface("docs", uris=("demo://b",), prompts=("simple", "other"))
        await send.send(fresh)
        catalog = await router.cell.wait_until(lambda c: not c.servers["docs"].cached_only)
        send.close()
    assert list(catalog.resources) == ["demo://b"] and list(catalog.prompts) == ["docs_simple", "docs_other"]
    (told,) = sunk
    assert (told.server, told.tools, told.resources, told.prompts, told.features) == (
        "docs",
        fresh.tools,
        fresh.resources,
        fresh.prompts,
        FEATURES,
    )
