"""Trust ``pattern`` semantics: what a pattern sees (candidates), and how rules use them.

The candidates of a call are every string value in its arguments, nested ones
included, or, for a tool whose schema declares a path/URL-like argument, the values of
those arguments. ``deny`` and ``ask`` apply when any candidate matches, ``allow`` only
when every one does; a call with none is matched as "". Properties check each of these
against a reference written here independently of ``actors/router/subjects.py``.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.router.risk import Risk
from actors.router.subjects import Candidate, candidates_of, declares_subject_arguments
from actors.router.trust import Action, CompiledRule, Decision, compile_rules, decide

WRITES = Risk(writes=True, reasons=("name mentions write",))


def decide_for(
    arguments: Mapping[str, Any], rules: list[tuple[str, str, str]], *, keyed: bool = False
) -> Decision:
    """An untrusted writer (default: ask), so any allow or deny seen came from a rule."""
    compiled = compile_rules(rules)
    return decide(
        "srv", "tool", arguments, trusted=False, risk=WRITES, rules=compiled, subject_arguments=keyed
    )


def texts(arguments: Any, *, keyed: bool = False) -> list[str]:
    return [c.text for c in candidates_of(arguments, subject_arguments=keyed)]


# --- what a pattern sees ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"message": "secret plans"}, ["secret plans"]),
        ({"a": {"b": ["x", {"c": "y"}]}, "d": 1}, ["x", "y"]),
        ({"path": "/tmp/x", "content": "hello"}, ["hello", "/tmp/x"]),  # keys sorted
        ({"source": "/tmp/a", "destination": "/etc/b"}, ["/etc/b", "/tmp/a"]),
        # A string that may name another path is also checked normalized.
        ({"dest": "/tmp/../etc/passwd"}, ["/tmp/../etc/passwd", "/etc/passwd"]),
        ({"dest": "a/./b"}, ["a/./b", "a/b"]),
        ({"dest": "//etc/passwd"}, ["//etc/passwd", "/etc/passwd"]),
        ({"note": "see ../README"}, ["see ../README"]),  # ".." inside a word is no segment
        ({"n": 1, "b": True, "z": None}, []),
        ({}, []),
        ({"ville": "Zürich"}, ["Zürich"]),
    ],
)
def test_every_string_is_a_candidate_for_a_tool_without_subject_arguments(
    arguments: Mapping[str, Any], expected: list[str]
) -> None:
    assert texts(arguments) == expected


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": "/tmp/x", "content": "hello"}, ["/tmp/x"]),
        ({"file_path": "/a/b"}, ["/a/b"]),
        ({"filePath": "/a/b"}, ["/a/b"]),
        ({"filename": "notes.txt"}, ["notes.txt"]),
        ({"url": "https://example.com/a?b=c", "max_length": 5000}, ["https://example.com/a?b=c"]),
        ({"uri": "file:///etc/hosts"}, ["file:///etc/hosts"]),
        ({"command": "ls -la"}, ["ls -la"]),
        ({"command": "git", "args": ["status", "--short"]}, ["git status --short"]),
        ({"command": ["rm", "-rf", "/"]}, ["rm -rf /"]),
        ({"command": "ls", "args": [1, "-l"]}, ["ls -l"]),
        ({"cmd": "echo hi"}, ["echo hi"]),
        # Not path- or URL-like: no candidate among them.
        ({"query": "is:open label:bug"}, []),
        ({"name": "timezone"}, []),
        # All of them now, not the first one present.
        ({"query": "q", "url": "https://x", "path": "/p"}, ["/p", "https://x"]),
        # Paths are normalized, other strings are not.
        ({"path": "/tmp/a/../../etc/./passwd"}, ["/etc/passwd"]),
        ({"path": "//etc/passwd"}, ["/etc/passwd"]),
        ({"url": "https://x/a/../b"}, ["https://x/a/../b"]),
        ({"path": ""}, [""]),
        # Nested: inside lists, inside objects, a list of paths.
        ({"files": [{"path": "/tmp/a"}, {"path": "/etc/b"}]}, ["/tmp/a", "/etc/b"]),
        ({"path": ["/etc/passwd", "/tmp/x"], "url": "https://x"}, ["/etc/passwd", "/tmp/x", "https://x"]),
        ({"edits": [{"oldText": "a", "newText": "b"}], "path": "/tmp/f"}, ["/tmp/f"]),
        # Not a string: nothing to check.
        ({"path": 5, "content": "x"}, []),
        ({"content": "only this"}, []),
    ],
)
def test_only_subject_arguments_are_candidates_for_a_tool_that_declares_them(
    arguments: Mapping[str, Any], expected: list[str]
) -> None:
    assert texts(arguments, keyed=True) == expected


def test_candidates_of_frozen_mappings_and_tuples() -> None:
    arguments = MappingProxyType({"b": MappingProxyType({"c": ("x", 1)})})
    assert texts(arguments) == ["x"]


@pytest.mark.parametrize(
    ("location", "where"),
    [
        ((), "the arguments"),
        (("path",), "path"),
        (("files", 1, "path"), "files[1].path"),
        (("a b", 0), '["a b"][0]'),
        (("x", "line\nbreak"), 'x["line\\nbreak"]'),
        (("k" * 300,), "k" * 99 + "…"),
    ],
)
def test_candidate_locations(location: tuple[str | int, ...], where: str) -> None:
    assert Candidate(location, "t").where() == where


FS_WRITE = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("schema", "declares"),
    [
        (FS_WRITE, True),
        ({"type": "object", "properties": {"url": {"type": "string"}, "max_length": {}}}, True),
        ({"type": "object", "properties": {"filePath": {"type": "string"}}}, True),
        ({"type": "object", "properties": {"paths": {"type": "array"}}}, False),  # read_multiple_files
        ({"type": "object", "properties": {"source": {}, "destination": {}}}, False),  # move_file
        ({"type": "object", "properties": {"message": {"type": "string"}}}, False),
        ({"type": "object", "properties": {"name": {}, "message": {}}}, False),  # name is no path
        ({"type": "object", "properties": {"query": {"type": "string"}}}, False),
        ({"type": "object"}, False),
        ({"type": "object", "properties": 5}, False),
        (
            {"type": "object", "properties": {"files": {"type": "array", "items": {"$ref": "#/$defs/f"}}},
             "$defs": {"f": {"type": "object", "properties": {"path": {"type": "string"}}}}},
            True,
        ),
        ({"anyOf": [{"properties": {"x": {}}}, {"properties": {"uri": {}}}]}, True),
    ],
)  # fmt: skip
def test_declares_subject_arguments(schema: Mapping[str, Any], declares: bool) -> None:
    assert declares_subject_arguments(schema) is declares


def test_a_huge_schema_counts_as_declaring_none() -> None:
    deep: dict[str, Any] = {"properties": {"path": {"type": "string"}}}
    for _ in range(20_000):
        deep = {"type": "array", "items": deep}
    assert declares_subject_arguments(deep) is False  # every string is checked: the strict reading
    shallow: dict[str, Any] = {"properties": {"path": {"type": "string"}}}
    for _ in range(100):
        shallow = {"type": "array", "items": shallow}
    assert declares_subject_arguments(shallow) is True


# --- examples that the compact-JSON subject got wrong ------------------------------------------


def test_a_pattern_sees_a_string_argument_not_json() -> None:
    denied = decide_for({"message": "secret plans"}, [("*", "secret*", "deny")])
    assert (denied.action, denied.rule) == (Action.DENY, 0)
    assert "(argument message)" in denied.reason


def test_a_pattern_sees_nested_strings() -> None:
    arguments = {"options": {"notes": ["fine", "secret plans"]}}
    denied = decide_for(arguments, [("*", "secret*", "deny")])
    assert (denied.action, denied.rule) == (Action.DENY, 0)
    assert "(argument options.notes[1])" in denied.reason
    files = {"files": [{"path": "/tmp/a"}, {"path": "/etc/shadow"}]}
    assert decide_for(files, [("*", "/etc/*", "deny")], keyed=True).action is Action.DENY
    assert decide_for(files, [("*", "/tmp/*", "allow")], keyed=True).action is Action.ASK


def test_an_undeclared_path_argument_cannot_narrow_what_an_allow_checks() -> None:
    # Formerly the first "path" key was the whole subject, whatever the tool declared.
    rules = [("mcp:srv:tool", "/tmp/*", "allow")]
    tricked = {"dest": "/etc/passwd", "path": "/tmp/harmless"}
    assert decide_for(tricked, rules).action is Action.ASK
    assert decide_for({"dest": "/tmp/a", "path": "/tmp/b"}, rules).action is Action.ALLOW


def test_an_undeclared_name_argument_cannot_hide_a_string_from_a_deny() -> None:
    rules = [("*", "secret*", "deny")]
    assert decide_for({"name": "x", "message": "secret plans"}, rules).action is Action.DENY


def test_a_declared_name_or_query_argument_cannot_hide_a_string_from_a_deny() -> None:
    # A tool that declares "name" (or "query") is checked on all its strings: neither
    # names a place, so neither narrows what a pattern sees.
    schema = {"type": "object", "properties": {"name": {}, "message": {}}}
    rules = [("*", "secret*", "deny")]
    keyed = declares_subject_arguments(schema)
    assert decide_for({"name": "x", "message": "secret plans"}, rules, keyed=keyed).action is Action.DENY


def test_a_long_string_is_matched_whole() -> None:
    # The subject used to be cut to its head and tail; padding hid the middle.
    message = "a" * 5_000 + " secret " + "b" * 5_000
    assert decide_for({"message": message}, [("*", "*secret*", "deny")]).action is Action.DENY


def test_an_unnormalized_path_in_any_string_is_checked_both_ways() -> None:
    arguments = {"dest": "/tmp/../etc/passwd"}
    assert decide_for(arguments, [("*", "/etc/*", "deny")]).action is Action.DENY
    assert decide_for(arguments, [("*", "/tmp/*", "allow")]).action is Action.ASK


README_RULES = [
    ("mcp:github:*", "*", "allow"),
    ("mcp:*:shell_*", "*", "ask"),
    ("mcp:fs:write_file", "/tmp/*", "allow"),
]


def readme_decision(server: str, tool: str, arguments: Mapping[str, Any], *, keyed: bool) -> Decision:
    rules = compile_rules(
        [*README_RULES, ("mcp:mail:*", "*secret*", "deny"), ("mcp:fs:move_file", "/tmp/*", "allow")]
    )
    return decide(server, tool, arguments, trusted=False, risk=WRITES, rules=rules, subject_arguments=keyed)


def test_the_readme_examples() -> None:
    def write_file(arguments: Mapping[str, Any]) -> Decision:
        return readme_decision("fs", "write_file", arguments, keyed=True)

    allowed = write_file({"path": "/tmp/x", "content": "hello"})
    assert (allowed.action, allowed.rule) == (Action.ALLOW, 2)
    assert write_file({"path": "/etc/passwd", "content": "/tmp/x"}).action is Action.ASK
    assert write_file({"path": "/tmp/../etc/passwd"}).action is Action.ASK
    # Had write_file no path-like argument, both strings would be candidates: still no allow.
    assert (
        readme_decision("fs", "write_file", {"path": "/etc/passwd", "content": "/tmp/x"}, keyed=False).rule
        is None
    )
    for arguments in ({"to": "a@b", "message": "the secret plan"}, {"body": {"parts": ["hi", "secret"]}}):
        assert readme_decision("mail", "send", arguments, keyed=False).action is Action.DENY
    denied = readme_decision("mail", "send", {"to": "a@b", "message": "the secret plan"}, keyed=False)
    assert denied.reason == (
        "trust rule [3] permission='mcp:mail:*' pattern='*secret*' matched 'mcp:mail:send' "
        "(argument message): deny"
    )
    moved = readme_decision("fs", "move_file", {"source": "/tmp/a", "destination": "/tmp/b"}, keyed=False)
    assert moved.action is Action.ALLOW
    assert "(every argument checked: destination, source)" in moved.reason
    escaped = readme_decision(
        "fs", "move_file", {"source": "/tmp/a", "destination": "/etc/passwd"}, keyed=False
    )
    assert escaped.action is Action.ASK
    shell = readme_decision("box", "shell_exec", {"command": "ls"}, keyed=True)
    assert (
        shell.reason
        == "trust rule [1] permission='mcp:*:shell_*' pattern='*' matched 'mcp:box:shell_exec': ask"
    )


def test_a_call_without_candidates_is_matched_as_the_empty_string() -> None:
    for arguments in ({}, {"count": 3}, {"flags": [True, None]}):
        assert decide_for(arguments, [("*", "/tmp/*", "allow")]).action is Action.ASK
        assert decide_for(arguments, [("*", "secret*", "deny")]).action is Action.ASK
        assert decide_for(arguments, [("*", "*", "allow")]).action is Action.ALLOW
        everything = decide_for(arguments, [("*", "/tmp/*", "allow"), ("*", "*", "deny")])
        assert (everything.action, everything.rule) == (Action.DENY, 1)
    # A tool that declares a path, called without one: its default is not vouched for.
    assert decide_for({"pattern": "/tmp/x"}, [("*", "/tmp/*", "allow")], keyed=True).action is Action.ASK
    unchecked = decide_for({}, [("*", "*[!x]*", "deny"), ("*", "?*", "allow"), ("*", "", "ask")])
    assert (unchecked.action, unchecked.rule) == (Action.ASK, 2)
    assert "(no string argument to check)" in unchecked.reason


def test_a_rule_that_does_not_apply_leaves_the_call_to_earlier_rules() -> None:
    rules = [("mcp:srv:*", "*", "deny"), ("mcp:srv:tool", "/tmp/*", "allow")]
    assert decide_for({"dest": "/tmp/a"}, rules).rule == 1
    fallen = decide_for({"dest": "/tmp/a", "also": "/etc/b"}, rules)
    assert (fallen.action, fallen.rule) == (Action.DENY, 0)


# --- properties ------------------------------------------------------------------------------

SMALL = st.text(alphabet="/tmp.xs", max_size=6)
KEYS = st.sampled_from(["path", "url", "command", "args", "message", "dest", "note"]) | st.text(max_size=4)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | SMALL,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=3),
    max_leaves=12,
)
ARGUMENTS = st.dictionaries(KEYS, JSON, max_size=4)
PATTERNS = st.sampled_from(["*", "/tmp/*", "/t*", "*x", "", "?", "*s*", "[/.]*", "/*/.."]) | st.text(
    alphabet="/tm*?x", max_size=4
)
ACTIONS = st.sampled_from(["allow", "ask", "deny"])
_SEGMENT = re.compile(r"^/|(?:^|/)\.{1,2}(?:/|$)")


def reference_normpath(path: str) -> str:
    return re.sub("^/+", "/", posixpath.normpath(path))


def reference_strings(value: Any, where: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    """Every string at any depth, recursively (the arguments here are shallow)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from reference_strings(item, (*where, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from reference_strings(item, (*where, index))


def reference_texts(arguments: Any) -> list[str]:
    """The candidates of a tool without subject arguments, from the rules in the docstring."""
    found = []
    for _, text in reference_strings(arguments):
        found.append(text)
        normal = reference_normpath(text)
        if _SEGMENT.search(text) and normal != text:
            found.append(normal)
    return found


def reference_applies(action: str, pattern: str, candidates: list[str]) -> bool:
    matched = [fnmatch.fnmatchcase(text, pattern) for text in candidates or [""]]
    return all(matched) if action == "allow" else any(matched)


@given(ARGUMENTS)
def test_every_nested_string_is_a_candidate(arguments: dict[str, Any]) -> None:
    found = candidates_of(arguments, subject_arguments=False)
    assert sorted(c.text for c in found) == sorted(reference_texts(arguments))
    located = {(c.location, c.text) for c in found}
    for where, text in reference_strings(arguments):
        assert (where, text) in located


@given(ARGUMENTS, st.text(alphabet="/tmp.xs", min_size=1, max_size=6), st.data())
def test_a_nested_subject_argument_is_found_at_any_depth(
    arguments: dict[str, Any], path: str, data: st.DataObject
) -> None:
    wrapped: Any = {"path": path}
    for _ in range(data.draw(st.integers(0, 4))):
        wrapped = data.draw(st.sampled_from([[wrapped], {"inner": wrapped}, ["x", 1, wrapped]]))
    found = texts({**arguments, "zz_nest": wrapped}, keyed=True)
    assert reference_normpath(path) in found


@given(ARGUMENTS, PATTERNS, ACTIONS)
def test_deny_and_ask_apply_if_any_candidate_matches_allow_if_every_one(
    arguments: dict[str, Any], pattern: str, action: str
) -> None:
    decision = decide_for(arguments, [("*", pattern, action)])
    applies = reference_applies(action, pattern, reference_texts(arguments))
    assert (decision.rule == 0) is applies
    candidates = reference_texts(arguments)
    if action == "allow" and any(not fnmatch.fnmatchcase(text, pattern) for text in candidates):
        assert decision.action is not Action.ALLOW
    if action == "deny" and any(fnmatch.fnmatchcase(text, pattern) for text in candidates):
        assert decision.action is Action.DENY


@given(ARGUMENTS, PATTERNS, st.booleans())
def test_an_allow_with_a_pattern_never_applies_when_a_candidate_does_not_match(
    arguments: dict[str, Any], pattern: str, keyed: bool
) -> None:
    found = texts(arguments, keyed=keyed)
    decision = decide_for(arguments, [("*", pattern, "allow")], keyed=keyed)
    if any(not fnmatch.fnmatchcase(text, pattern) for text in found) or (
        not found and not fnmatch.fnmatchcase("", pattern)
    ):
        assert decision.action is Action.ASK and decision.rule is None
    else:
        assert decision.action is Action.ALLOW and decision.rule == 0


@given(ARGUMENTS, KEYS, JSON, PATTERNS)
def test_adding_an_argument_never_widens_an_allow_nor_escapes_a_deny(
    arguments: dict[str, Any], key: str, value: Any, pattern: str
) -> None:
    # A tool without subject arguments: whatever a call adds ("path" included) is one more
    # candidate, so an allow gets harder to meet and a deny easier.
    more = {**arguments, f"extra_{key}": value, **({} if key in arguments else {key: value})}
    if decide_for(more, [("*", pattern, "allow")]).rule == 0:
        assert decide_for(arguments, [("*", pattern, "allow")]).rule == 0 or not texts(arguments)
    if decide_for(arguments, [("*", pattern, "deny")]).rule == 0 and texts(arguments):
        assert decide_for(more, [("*", pattern, "deny")]).rule == 0


@given(ARGUMENTS, st.lists(st.tuples(st.sampled_from(["*", "mcp:srv:*", "mcp:other:*"]), PATTERNS, ACTIONS)))
def test_the_last_rule_that_applies_wins(
    arguments: dict[str, Any], rules: list[tuple[str, str, str]]
) -> None:
    candidates = reference_texts(arguments)
    applying = [
        index
        for index, (permission, pattern, action) in enumerate(rules)
        if fnmatch.fnmatchcase("mcp:srv:tool", permission) and reference_applies(action, pattern, candidates)
    ]
    decision = decide_for(arguments, rules)
    if applying:
        assert decision.rule == applying[-1]
        assert decision.action is Action(rules[applying[-1]][2])
        assert decision.reason.startswith(f"trust rule [{applying[-1]}] ")
    else:
        assert (decision.action, decision.rule) == (Action.ASK, None)


@given(st.lists(st.tuples(st.text(max_size=3), PATTERNS, ACTIONS), max_size=4), ARGUMENTS, st.booleans())
def test_candidates_and_decisions_never_raise(
    rules: list[tuple[str, str, str]], arguments: dict[str, Any], keyed: bool
) -> None:
    compiled: tuple[CompiledRule, ...] = compile_rules(rules)
    decision = decide(
        "s", "t", arguments, trusted=False, risk=WRITES, rules=compiled, subject_arguments=keyed
    )
    assert decision.rule is None or 0 <= decision.rule < len(compiled)
    assert declares_subject_arguments(arguments) in (True, False)
