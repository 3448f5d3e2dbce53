"""The URI rule: shown as is when one server publishes it, qualified when several do."""

from __future__ import annotations

import pytest

from actors.router.uris import QUALIFIED_PREFIX, qualify, shown_uris, unqualify


def test_a_uri_one_server_publishes_is_shown_as_it_is() -> None:
    shown = shown_uris([("fs1", "file:///projects/a.md"), ("docs", "demo://x")])
    assert shown == {
        ("fs1", "file:///projects/a.md"): "file:///projects/a.md",
        ("docs", "demo://x"): "demo://x",
    }


def test_a_uri_two_servers_publish_is_qualified_for_both_and_reversible() -> None:
    pairs = [("fs1", "file:///projects/a.md"), ("fs2", "file:///projects/a.md")]
    shown = shown_uris(pairs)
    assert shown[pairs[0]] == "mcp-supervisor://fs1/file:///projects/a.md"
    assert shown[pairs[1]] == "mcp-supervisor://fs2/file:///projects/a.md"
    for pair, form in shown.items():
        assert unqualify(form) == pair


def test_the_rule_does_not_depend_on_order() -> None:
    pairs = [("b", "u"), ("a", "u"), ("a", "v")]
    assert shown_uris(pairs) == shown_uris(list(reversed(pairs)))


@pytest.mark.parametrize("server", ["my server", "a%b", "ünï", "x:y@z", "under_score"])
def test_server_names_round_trip(server: str) -> None:
    uri = "file:///a/b?c=d#e"
    assert unqualify(qualify(server, uri)) == (server, uri)


def test_a_published_uri_that_looks_qualified_is_qualified_again() -> None:
    lookalike = f"{QUALIFIED_PREFIX}fs2/file:///x"
    shown = shown_uris([("fs1", lookalike)])
    assert shown[("fs1", lookalike)] == qualify("fs1", lookalike)
    assert unqualify(shown[("fs1", lookalike)]) == ("fs1", lookalike)


@pytest.mark.parametrize(
    "text", ["file:///x", "mcp-supervisor://", "mcp-supervisor://fs1", "mcp-supervisor:///x"]
)
def test_other_strings_are_not_qualified_forms(text: str) -> None:
    assert unqualify(text) is None
