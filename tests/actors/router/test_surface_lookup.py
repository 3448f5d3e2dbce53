"""Where a host's URI, prompt id or completion ref goes, and what it is told when it
cannot go anywhere; and resource template matching by shape."""

from __future__ import annotations

import attrs
import pytest

from actors.protocol.messages import Prompt, Resource, ResourceTemplate
from actors.router.catalog import Catalog, ServerView
from actors.router.surface import SurfaceBook
from actors.router.surface_lookup import SurfaceMiss, resolve_prompt, resolve_ref, resolve_uri
from actors.router.uri_templates import matches
from actors.router.uris import qualify
from actors.spec import ServerSpec
from tests.actors.router.test_router import connection_mailbox


def view(
    name: str, uris: tuple[str, ...] = (), templates: tuple[str, ...] = (), prompts: tuple[str, ...] = ()
) -> ServerView:
    return attrs.evolve(
        ServerView(name, ServerSpec(name), connection_mailbox()),
        resources=tuple(Resource(u, u) for u in uris),
        templates=tuple(ResourceTemplate(t, t) for t in templates),
        prompts=tuple(Prompt(p) for p in prompts),
    )


def catalog_of(*views: ServerView) -> Catalog:
    book = SurfaceBook()
    for v in views:
        book.put(v, 200)
    prompts, resources, templates = book.maps(v.name for v in views)
    return Catalog(1, {v.name: v for v in views}, prompts=prompts, resources=resources, templates=templates)


CATALOG = catalog_of(
    view("fs1", uris=("file:///a.md", "file:///one.md"), templates=("file:///{+path}",), prompts=("review",)),
    view("fs2", uris=("file:///a.md",), templates=("file:///{+path}",)),
    view("demo", uris=("demo://static/1",), templates=("demo://dynamic/{id}",)),
    view("empty"),
)


def miss(code: str, *args: object, **kwargs: object) -> str:
    with pytest.raises(SurfaceMiss) as caught:
        resolve_uri(CATALOG, *args, **kwargs)  # type: ignore[arg-type]
    assert caught.value.code == code
    return caught.value.message


def test_a_uri_one_server_lists_goes_to_it() -> None:
    assert resolve_uri(CATALOG, "file:///one.md") == ("fs1", "file:///one.md")
    assert resolve_uri(CATALOG, "demo://static/1") == ("demo", "demo://static/1")


def test_a_shown_qualified_uri_goes_to_its_server_with_its_own_uri() -> None:
    assert resolve_uri(CATALOG, qualify("fs2", "file:///a.md")) == ("fs2", "file:///a.md")
    assert resolve_uri(CATALOG, qualify("fs1", "file:///a.md")) == ("fs1", "file:///a.md")


def test_a_qualified_form_reaches_its_server_even_when_not_listed() -> None:
    assert resolve_uri(CATALOG, qualify("empty", "x://y")) == ("empty", "x://y")
    assert "no server 'ghost'" in miss("unknown_resource", qualify("ghost", "x://y"))


def test_a_uri_several_servers_publish_says_how_to_pick_one() -> None:
    message = miss("unknown_resource", "file:///a.md")
    assert message == (
        "resource file:///a.md is published by fs1 and fs2: read mcp-supervisor://fs1/file:///a.md "
        "or mcp-supervisor://fs2/file:///a.md, or pass server="
    )


def test_server_picks_the_publisher() -> None:
    assert resolve_uri(CATALOG, "file:///a.md", server="fs2") == ("fs2", "file:///a.md")
    assert resolve_uri(CATALOG, qualify("fs2", "file:///a.md"), server="fs2") == ("fs2", "file:///a.md")
    assert resolve_uri(CATALOG, "anything://at/all", server="empty") == ("empty", "anything://at/all")
    assert "server= says 'fs1'" in miss("invalid_arguments", qualify("fs2", "file:///a.md"), server="fs1")
    assert "no server 'ghost'" in miss("unknown_resource", "file:///a.md", server="ghost")


def test_a_published_uri_that_looks_qualified_still_reaches_its_publisher() -> None:
    lookalike = qualify("fs2", "file:///x")
    catalog = catalog_of(view("fs1", uris=(lookalike,)), view("fs2"))
    assert resolve_uri(catalog, qualify("fs1", lookalike)) == ("fs1", lookalike)
    assert resolve_uri(catalog, lookalike, server="fs1") == ("fs1", lookalike)
    assert resolve_uri(catalog, lookalike) == ("fs2", "file:///x")  # the form, read as a form


def test_an_unlisted_uri_goes_to_the_one_server_whose_template_matches() -> None:
    assert resolve_uri(CATALOG, "demo://dynamic/42") == ("demo", "demo://dynamic/42")
    message = miss("unknown_resource", "file:///elsewhere/b.md")
    assert "matches templates of fs1 and fs2" in message and "pass server=" in message
    message = miss("unknown_resource", "nothing://here")
    assert message.startswith("unknown resource nothing://here: no server in this turn lists it")
    assert "pass server=" in message


def test_prompts_resolve_by_id() -> None:
    entry = resolve_prompt(CATALOG, "fs1_review")
    assert (entry.server, entry.name) == ("fs1", "review")
    with pytest.raises(SurfaceMiss) as caught:
        resolve_prompt(CATALOG, "review")
    assert caught.value.code == "unknown_prompt"
    assert "unknown prompt review" in caught.value.message


def test_completion_refs_map_to_the_servers_own_names() -> None:
    assert resolve_ref(CATALOG, {"type": "ref/prompt", "name": "fs1_review"}) == (
        "fs1",
        {"type": "ref/prompt", "name": "review"},
    )
    shown = qualify("fs2", "file:///{+path}")
    assert resolve_ref(CATALOG, {"type": "ref/resource", "uri": shown}) == (
        "fs2",
        {"type": "ref/resource", "uri": "file:///{+path}"},
    )
    assert resolve_ref(CATALOG, {"type": "ref/resource", "uri": "demo://dynamic/{id}"}) == (
        "demo",
        {"type": "ref/resource", "uri": "demo://dynamic/{id}"},
    )
    for ref, code, words in [
        ({"type": "ref/resource", "uri": "file:///{+path}"}, "unknown_resource", "published by fs1 and fs2"),
        ({"type": "ref/resource", "uri": "nope://{x}"}, "unknown_resource", "unknown resource template"),
        ({"type": "ref/prompt", "name": "nope"}, "unknown_prompt", "unknown prompt nope"),
        ({"type": "ref/other"}, "invalid_arguments", "a completion ref is"),
        ("ref/prompt", "invalid_arguments", "a completion ref is"),
    ]:
        with pytest.raises(SurfaceMiss) as caught:
            resolve_ref(CATALOG, ref)
        assert caught.value.code == code and words in caught.value.message


@pytest.mark.parametrize(
    ("template", "uri", "expected"),
    [
        ("demo://dynamic/{id}", "demo://dynamic/42", True),
        ("demo://dynamic/{id}", "demo://dynamic/4/2", False),  # simple values hold no "/"
        ("demo://dynamic/{id}", "demo://dynamic/", True),  # an empty value
        ("demo://dynamic/{id}", "demo://other/42", False),
        ("file:///{+path}", "file:///a/b/c.md", True),
        ("file://{/segments}", "file:///a/b", True),
        ("search{?q,lang}", "search?q=x&lang=en", True),
        ("search{?q}{&lang}", "search?q=x&lang=en", True),
        ("page{#frag}", "page#top", True),
        ("x{.ext}", "x.tar.gz", True),
        ("m{;p}", "m;a=1", True),
        ("a.b/{x}", "aXb/1", False),  # literal parts are literal
        ("broken{x", "broken{x", True),  # not well formed: itself only
        ("broken{x", "brokenY", False),
    ],
)
def test_template_shapes(template: str, uri: str, expected: bool) -> None:
    assert matches(template, uri) is expected
