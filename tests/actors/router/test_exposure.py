"""Exposure lists, pure: which names a list admits, which rules cover a server, and a
catalog cut for one audience (tools, resources, templates, prompts; shown URIs worked
out again; lookups of what it hides refused as of what nobody lists)."""

from __future__ import annotations

import attrs
import pytest
import rpds

from actors.protocol.messages import Tool
from actors.router.catalog import Catalog, make_entry, shard_of
from actors.router.exposure import Lists, ServerRule, Sieve, sieved
from actors.router.surface_lookup import SurfaceMiss, resolve_prompt, resolve_ref, resolve_uri
from actors.router.uris import qualify
from actors.spec import ServerSpec
from tests.actors.router.test_surface_lookup import catalog_of, view


@pytest.mark.parametrize(
    ("lists", "name", "admitted"),
    [
        (Lists(), "anything", True),
        (Lists(deny=("delete_*",)), "delete_repo", False),
        (Lists(deny=("delete_*",)), "get_repo", True),
        (Lists(allow=("get_*", "search_*")), "search_code", True),
        (Lists(allow=("get_*",)), "delete_repo", False),
        (Lists(allow=()), "get_repo", False),  # an empty allow list admits nothing
        (Lists(allow=("*",), deny=("*_admin",)), "user_admin", False),  # deny wins
        (Lists(deny=("Get_*",)), "get_repo", True),  # case-sensitive
        (Lists(deny=("file:///etc/*",)), "file:///etc/ssh/sshd_config", False),  # * crosses /
    ],
)
def test_a_list_admits_what_it_allows_unless_it_denies_it(lists: Lists, name: str, admitted: bool) -> None:
    assert lists.admits(name) is admitted


def test_every_rule_covering_a_server_must_admit_a_name() -> None:
    sieve = Sieve(
        (
            ServerRule("git*", tools=Lists(allow=("get_*", "search_*"))),
            ServerRule("github", tools=Lists(allow=("search_*", "list_*"))),
            ServerRule("*", prompts=Lists(deny=("admin",))),
        )
    )
    assert [r.server for r in sieve.of("github")] == ["git*", "github", "*"]
    assert sieve.shows("github", "tools", "search_code")
    assert not sieve.shows("github", "tools", "get_repo")  # the second allow list lacks it
    assert sieve.shows("gitlab", "tools", "get_repo")
    assert not sieve.shows("docs", "prompts", "admin") and sieve.shows("docs", "tools", "admin")


def tool_view(name: str, tools: tuple[str, ...], **surface: tuple[str, ...]):  # type: ignore[no-untyped-def]
    spec = ServerSpec(name)
    entries = tuple(make_entry(f"{name}_{t}", spec, Tool(t, f"{t} things"), 200) for t in tools)
    return attrs.evolve(view(name, **surface), entries=entries, generation=1)


def full_catalog() -> Catalog:
    fs1 = tool_view("fs1", ("read", "write"), uris=("file:///a.md", "file:///one.md"), prompts=("review",))
    fs2 = tool_view("fs2", ("read",), uris=("file:///a.md",), templates=("file:///{+path}",))
    base = catalog_of(fs1, fs2)
    tools = rpds.HashTrieMap({e.id: e for v in (fs1, fs2) for e in v.entries})
    index = base.search_index.with_server(shard_of(fs1)).with_server(shard_of(fs2))
    return attrs.evolve(base, tools=tools, search_index=index, epoch=7)


HIDE_FS2_COPY = Sieve(
    (
        ServerRule("fs2", resources=Lists(deny=("file:///a.md",))),
        ServerRule("fs1", tools=Lists(deny=("write",)), prompts=Lists(deny=("review",))),
    )
)


def test_a_sieved_catalog_keeps_its_epoch_and_loses_what_is_hidden() -> None:
    before = full_catalog()
    after = sieved(before, HIDE_FS2_COPY)
    assert after.epoch == 7 and after.sieve is HIDE_FS2_COPY
    assert sorted(after.tools) == ["fs1_read", "fs2_read"]
    assert [e.id for e in after.listing] == ["fs1_read", "fs2_read"]
    assert after.servers["fs1"].tool_names == ("read",)
    assert after.prompts == {} and after.servers["fs1"].prompts == ()
    # fs2's copy of a.md is hidden: fs1's is the only one left, shown as it is
    assert list(after.resources) == ["file:///a.md", "file:///one.md"]
    assert after.resources["file:///a.md"].server == "fs1"
    assert [r.uri for r in after.servers["fs2"].resources] == []
    # the template stays (its own string is not denied), the search skips hidden tools
    assert list(after.templates) == ["file:///{+path}"]

    def found(catalog: Catalog) -> list[str]:
        return [m.id for m in catalog.search_index.search("write", 10, allow=catalog.tools.__contains__)]

    assert found(before) == ["fs1_write"] and found(after) == []


def test_a_sieve_that_hides_nothing_changes_no_entry() -> None:
    before = full_catalog()
    after = sieved(before, Sieve((ServerRule("*", tools=Lists(deny=("nothing_*",))),)))
    assert dict(after.tools) == dict(before.tools)
    assert all(after.resources[k] is before.resources[k] for k in before.resources)


def test_lookups_refuse_what_the_sieve_hides_as_what_nobody_lists() -> None:
    after = sieved(full_catalog(), HIDE_FS2_COPY)
    nobody = "no server in this turn lists it or has a template it matches"
    for uri, server in ((qualify("fs2", "file:///a.md"), None), ("file:///a.md", "fs2")):
        with pytest.raises(SurfaceMiss) as caught:
            resolve_uri(after, uri, server)
        assert caught.value.code == "unknown_resource" and nobody in caught.value.message
    assert resolve_uri(after, "file:///a.md") == ("fs1", "file:///a.md")
    with pytest.raises(SurfaceMiss) as prompt:
        resolve_prompt(after, "fs1_review")
    assert prompt.value.code == "unknown_prompt"
    with pytest.raises(SurfaceMiss) as completion:
        resolve_ref(after, {"type": "ref/prompt", "name": "fs1_review"})
    assert completion.value.code == "unknown_prompt"


def test_a_uri_made_from_a_visible_template_is_refused_when_its_own_glob_hides_it() -> None:
    sieve = Sieve((ServerRule("fs2", resources=Lists(deny=("file:///secret/*",))),))
    after = sieved(full_catalog(), sieve)
    assert resolve_uri(after, "file:///notes/x.md", "fs2") == ("fs2", "file:///notes/x.md")
    with pytest.raises(SurfaceMiss) as caught:
        resolve_uri(after, "file:///secret/key.pem", "fs2")
    assert caught.value.code == "unknown_resource"
    hidden_template = Sieve((ServerRule("fs2", resources=Lists(deny=("file:///{+path}",))),))
    without = sieved(full_catalog(), hidden_template)
    assert without.templates == {}
    with pytest.raises(SurfaceMiss):
        resolve_ref(without, {"type": "ref/resource", "uri": qualify("fs2", "file:///{+path}")})


def test_an_audience_the_lists_apply_to_sees_a_servers_problems_counted_not_quoted() -> None:
    """A problem may name a tool the lists hide ("tool 'write' left out: …")."""
    before = full_catalog()
    fs1 = attrs.evolve(before.servers["fs1"], problems=("tool 'write' left out: bad schema", "another"))
    before = attrs.evolve(before, servers={**before.servers, "fs1": fs1})
    after = sieved(before, HIDE_FS2_COPY)
    assert after.servers["fs1"].problems == (
        "2 problem(s) with what this server listed; the operator's view names them",
    )
    assert "write" not in str(after.servers["fs1"].problems)
    assert before.servers["fs1"].problems == fs1.problems  # the operator's catalog keeps them
