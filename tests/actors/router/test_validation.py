"""Argument validation against inputSchema (in a call: once the tool is found, before trust)."""

from __future__ import annotations

import math
import socket
import urllib.request
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema.validators import (  # type: ignore[import-untyped]
    Draft7Validator,
    Draft202012Validator,
    validator_for,
)

from actors.router import plain_schemas, schema_compiler
from actors.router.schema_compiler import compile_schema
from actors.router.validation import (
    MAX_PROBLEM_CHARS,
    SchemaCheck,
    json_path,
    validate_arguments,
)

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"

ISSUE = {
    "type": "object",
    "properties": {
        "repo": {
            "type": "object",
            "properties": {"owner": {"type": "string"}, "stars": {"type": "integer", "minimum": 0}},
            "required": ["owner"],
        },
        "labels": {"type": "array", "items": {"type": "string"}},
        "state": {"enum": ["open", "closed"]},
        "title": {"type": "string", "maxLength": 50},
    },
    "required": ["repo", "title"],
    "additionalProperties": False,
}

# As @modelcontextprotocol/server-everything publishes its "add" tool (zod-to-json-schema).
EVERYTHING_ADD = {
    "type": "object",
    "properties": {
        "a": {"type": "number", "description": "First number"},
        "b": {"type": "number", "description": "Second number"},
    },
    "required": ["a", "b"],
    "additionalProperties": False,
    "$schema": DRAFT_07,
}


def check(schema: dict[str, Any]) -> SchemaCheck:
    result = compile_schema(schema)
    assert result.validator is not None, result.problem
    return result


def problem(schema: dict[str, Any], arguments: Any) -> str | None:
    return validate_arguments("github_create_issue", check(schema), arguments)


# -- valid and invalid arguments ---------------------------------------------------------


def test_valid_arguments_pass() -> None:
    assert problem(ISSUE, {"repo": {"owner": "me"}, "title": "x", "labels": ["a"], "state": "open"}) is None
    assert validate_arguments("everything_add", check(EVERYTHING_ADD), {"a": 1, "b": 2.5}) is None


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"title": "x"}, "$: 'repo' is a required property"),
        ({"repo": {}, "title": "x"}, "$.repo: 'owner' is a required property"),
        ({"repo": {"owner": 5}, "title": "x"}, "$.repo.owner: 5 is not of type 'string'"),
        (
            {"repo": {"owner": "me", "stars": -1}, "title": "x"},
            "$.repo.stars: -1 is less than the minimum of 0",
        ),
        (
            {"repo": {"owner": "me"}, "title": "x", "labels": ["a", "b", 3]},
            "$.labels[2]: 3 is not of type 'string'",
        ),
        (
            {"repo": {"owner": "me"}, "title": "x", "state": "merged"},
            "$.state: 'merged' is not one of ['open', 'closed']",
        ),
        (
            {"repo": {"owner": "me"}, "title": "x", "body": "y"},
            "$: Additional properties are not allowed ('body' was unexpected)",
        ),
    ],
)
def test_messages_name_the_path_and_the_problem(arguments: dict[str, Any], message: str) -> None:
    assert problem(ISSUE, arguments) == f"invalid arguments for github_create_issue: {message}"


@pytest.mark.parametrize("arguments", [None, [], "x", 3, 2.5, True, [{"repo": {}}]])
def test_arguments_must_be_an_object(arguments: Any) -> None:
    assert problem(ISSUE, arguments) == "invalid arguments for github_create_issue: $: must be an object"


def test_draft_07_from_dollar_schema() -> None:
    add = check(EVERYTHING_ADD)
    assert add.draft == DRAFT_07
    assert validate_arguments("everything_add", add, {"a": 1}) == (
        "invalid arguments for everything_add: $: 'b' is a required property"
    )
    assert validate_arguments("everything_add", add, {"a": 1, "b": "2"}) == (
        "invalid arguments for everything_add: $.b: '2' is not of type 'number'"
    )
    # Tuple-form "items" is draft-07 only: valid there, a schema problem under 2020-12.
    pair = {"type": "object", "properties": {"p": {"type": "array", "items": [{"type": "string"}]}}}
    assert check({**pair, "$schema": DRAFT_07}).validator is not None
    broken = compile_schema(pair)
    assert broken.draft == DRAFT_2020
    assert broken.problem is not None and broken.problem.startswith(
        "inputSchema is not a valid JSON Schema: $.properties.p.items: "
    )


def test_2020_12_is_the_default_and_an_unknown_dialect_falls_back_to_it() -> None:
    assert check({"type": "object"}).draft == DRAFT_2020
    assert check({"type": "object", "$schema": "https://example.com/my-dialect"}).draft == DRAFT_2020


def test_json_path() -> None:
    assert json_path([]) == "$"
    assert json_path(["a", "b"]) == "$.a.b"
    assert json_path(["items", 2, "name"]) == "$.items[2].name"
    assert json_path(["odd key", "x.y"]) == '$["odd key"]["x.y"]'
    assert len(json_path(["k" * 1000])) < 60


def test_odd_keys_in_paths() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert (
        problem(schema, {"a b": "x"})
        == "invalid arguments for github_create_issue: $[\"a b\"]: 'x' is not of type 'integer'"
    )


def test_long_values_are_cut() -> None:
    huge = "x" * 100_000
    message = problem(ISSUE, {"repo": {"owner": "me"}, "title": huge})
    assert message is not None
    assert message.startswith("invalid arguments for github_create_issue: $.title: 'xxx")
    detail = message.split(": ", 2)[2]
    assert len(detail) == MAX_PROBLEM_CHARS and detail.endswith("...")
    message = problem({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": {"k": huge}})
    assert message is not None and len(message) < 300


def test_deeply_nested_arguments_do_not_raise() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#"}}}
    arguments: dict[str, Any] = {}
    node = arguments
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    message = problem(schema, arguments)
    assert message is None or message.startswith("invalid arguments for github_create_issue: ")


# -- invalid schemas ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "strng"}}},
            "inputSchema is not a valid JSON Schema: $.properties.a.type: ",
        ),
        ({"type": "object", "required": "a"}, "inputSchema is not a valid JSON Schema: $.required: "),
        (
            {"type": "object", "properties": {"p": {"type": "string", "pattern": "(["}}},
            "inputSchema is not a valid JSON Schema: $.properties.p.pattern: ",
        ),
        ({"type": "array", "items": {"type": "string"}}, "inputSchema must describe an object"),
        ({"type": "string"}, "inputSchema must describe an object"),
        ({"type": "object", "$ref": "#"}, "inputSchema refers to itself without end"),
    ],
)
def test_invalid_schemas_are_problems_not_exceptions(schema: dict[str, Any], expected: str) -> None:
    result = compile_schema(schema)
    assert result.validator is None
    assert result.problem is not None and result.problem.startswith(expected), result.problem
    assert validate_arguments("srv_tool", result, {}) == f"tool srv_tool cannot be called: {result.problem}"


def test_a_schema_that_is_not_a_mapping() -> None:
    result = compile_schema([1, 2])  # type: ignore[arg-type]
    assert result.problem == "inputSchema must describe an object"
    assert compile_schema({"type": "object", "x": {1, 2}}).problem is not None  # not JSON


# -- never the network --------------------------------------------------------------------


@pytest.fixture
def network_attempts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record (and block) every way jsonschema or referencing could reach out."""
    attempts: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(repr(args[:2]))
        raise OSError("network disabled in this test")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    yield attempts


def test_remote_ref_is_a_problem_not_a_fetch(network_attempts: list[str]) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.com/remote-schema.json"}}}
    result = compile_schema(schema)
    assert result.validator is None
    assert result.problem == (
        "inputSchema refers to https://example.com/remote-schema.json, which cannot be resolved "
        "(references are never fetched)"
    )
    assert network_attempts == []


def test_relative_ref_to_a_remote_base_is_refused_at_call_time(network_attempts: list[str]) -> None:
    schema = {
        "$id": "https://example.com/root.json",
        "type": "object",
        "properties": {"a": {"$ref": "other.json"}},
    }
    result = check(schema)
    assert validate_arguments("srv_tool", result, {}) is None  # the reference is not reached
    message = validate_arguments("srv_tool", result, {"a": 1})
    assert message is not None and message.startswith(
        "tool srv_tool cannot be called: inputSchema refers to "
    )
    assert network_attempts == []


def test_local_and_bundled_refs_resolve_offline(network_attempts: list[str]) -> None:
    schema = {
        "type": "object",
        "$defs": {"name": {"type": "string"}, "id": {"$id": "https://example.com/id", "type": "integer"}},
        "properties": {
            "name": {"$ref": "#/$defs/name"},
            "id": {"$ref": "https://example.com/id"},
            "schema": {"$ref": "https://json-schema.org/draft/2020-12/schema"},
        },
    }
    result = check(schema)
    assert validate_arguments("t", result, {"name": "x", "id": 1, "schema": {"type": "string"}}) is None
    assert (
        validate_arguments("t", result, {"id": "1"})
        == "invalid arguments for t: $.id: '1' is not of type 'integer'"
    )
    assert validate_arguments("t", result, {"schema": {"type": 5}}) is not None
    assert network_attempts == []


# -- compiled once ------------------------------------------------------------------------


def test_same_schema_same_compiled_check() -> None:
    first = compile_schema({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
    again = compile_schema({"required": ["a"], "properties": {"a": {"type": "string"}}, "type": "object"})
    assert again is first
    assert compile_schema({"type": "object", "properties": {"a": {"type": "integer"}}}) is not first


def test_a_compiled_check_is_detached_from_the_callers_schema() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"detached": {"type": "string"}}}
    result = compile_schema(schema)
    schema["properties"]["detached"]["type"] = "integer"
    assert validate_arguments("t", result, {"detached": "text"}) is None


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema_compiler, "CACHE_SIZE", 3)
    schemas = [{"type": "object", "properties": {f"bounded{i}": {"type": "string"}}} for i in range(5)]
    checks = [compile_schema(s) for s in schemas]
    assert len(schema_compiler._cache) <= 3
    assert compile_schema(schemas[4]) is checks[4]  # recent: kept
    assert compile_schema(schemas[0]) is not checks[0]  # oldest: evicted, compiled again


# -- never raises -------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)

SCHEMAS = [
    ISSUE,
    EVERYTHING_ADD,
    {"type": "object"},
    {
        "type": "object",
        "properties": {"a": {"$ref": "#"}, "b": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
    },
    {
        "type": "object",
        "patternProperties": {"^x": {"type": "number"}},
        "additionalProperties": {"type": "array"},
    },
    {"type": "object", "properties": {"q": {"anyOf": [{"const": 1}, {"type": "object", "required": ["k"]}]}}},
]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(SCHEMAS),
    json_values | st.dictionaries(st.sampled_from(["a", "b", "q", "x1", "repo"]), json_values),
)
def test_any_json_arguments_give_none_or_a_message(schema: dict[str, Any], arguments: Any) -> None:
    message = validate_arguments("srv_tool", check(schema), arguments)
    assert message is None or message.startswith("invalid arguments for srv_tool: $")
    if message is not None:
        assert len(message) <= len("invalid arguments for srv_tool: ") + 2 * MAX_PROBLEM_CHARS


KEYWORDS = [
    "type", "properties", "required", "items", "prefixItems", "additionalProperties", "patternProperties",
    "enum", "const", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref", "$defs", "definitions",
    "$id", "$anchor", "$dynamicRef", "$schema", "pattern", "format", "minimum", "maxLength", "minItems",
    "uniqueItems", "dependentRequired", "x-extension",
]  # fmt: skip
REF_LIKE = st.sampled_from(
    ["#", "#/$defs/a", "#/nope", "#a", "a.json", "urn:x", "http://[::1", "%zz", DRAFT_07]
)
TYPE_LIKE = st.sampled_from(["object", "string", "integer", "array", "null", "strng"])
schema_values = st.recursive(
    json_values | REF_LIKE | TYPE_LIKE,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from([*KEYWORDS, "a", "b"]), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(KEYWORDS), schema_values, max_size=5),
    st.booleans(),
    json_values | st.dictionaries(st.sampled_from(["a", "b"]), json_values),
)
def test_any_schema_compiles_to_a_check_or_a_problem(
    schema: dict[str, Any], object_type: bool, arguments: Any
) -> None:
    if object_type:
        schema["type"] = "object"
    result = compile_schema(schema)
    assert (result.validator is None) != (result.problem is None)
    message = validate_arguments("srv_tool", result, arguments)
    assert message is None or message.startswith(
        ("invalid arguments for srv_tool: $", "tool srv_tool cannot be called: ")
    )


# -- the meta-schema fast path ------------------------------------------------------------

PYDANTIC_LIKE = {
    "$defs": {
        "Point": {
            "properties": {"x": {"title": "X", "type": "number"}, "y": {"title": "Y", "type": "number"}},
            "required": ["x", "y"],
            "title": "Point",
            "type": "object",
        }
    },
    "properties": {
        "where": {"$ref": "#/$defs/Point"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Note"},
        "tags": {"items": {"type": "string", "pattern": "^[a-z]+$"}, "type": "array", "uniqueItems": True},
    },
    "required": ["where"],
    "title": "placeArguments",
    "type": "object",
}


@pytest.mark.parametrize("schema", [ISSUE, EVERYTHING_ADD, PYDANTIC_LIKE])
def test_common_schemas_skip_the_meta_schema(schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(*args: Any) -> str | None:
        raise AssertionError("the meta-schema was consulted")

    monkeypatch.setattr(schema_compiler, "_schema_problem", slow)
    schema_compiler._cache.clear()
    assert compile_schema(schema).validator is not None


META = {
    draft: validator_for(meta, default=cls)(meta, format_checker=cls.FORMAT_CHECKER)
    for draft, cls, meta in (
        (DRAFT_07, Draft7Validator, Draft7Validator.META_SCHEMA),
        (DRAFT_2020, Draft202012Validator, Draft202012Validator.META_SCHEMA),
    )
}
# Values at the edges of the rules: wrong types, negatives, duplicates, empty lists.
EDGE_VALUES: list[Any] = [
    *(-1, 0, 2, 1.5, -0.5, True, False, None, "x", "string", "strng", "(", "^a+$", "#/$defs/x", "a.json"),
    *([], ["string"], ["string", "string"], ["string", "null"], ["a", "a"], ["a"], [{}], [{"type": "strng"}]),
    *({}, {"type": "string"}, {"type": "strng"}, {"a": {}}, {"a": {"type": 5}}, {"a": True}, DRAFT_2020),
]
PLAIN_KEYWORDS = st.sampled_from(sorted(plain_schemas.RULES))
EDGES = st.sampled_from(EDGE_VALUES)
edge_schemas = st.recursive(
    st.dictionaries(PLAIN_KEYWORDS, EDGES, max_size=3),
    lambda inner: st.dictionaries(
        PLAIN_KEYWORDS,
        EDGES
        | inner
        | st.lists(inner, max_size=2)
        | st.dictionaries(st.sampled_from("ab"), inner, max_size=2),
        max_size=3,
    ),
    max_leaves=8,
)


def assert_meta_schemas_agree(schema: dict[str, Any]) -> None:
    """If the fast path calls a schema valid, so does each meta-schema it stands for."""
    if not plain_schemas.plainly_valid(schema, 0):
        return
    drafts = [schema["$schema"]] if "$schema" in schema else [DRAFT_2020]
    for draft in drafts:
        errors = [e.message for e in META[draft].iter_errors(schema)]
        assert errors == [], (draft, schema, errors)


def test_the_fast_path_rules_one_keyword_at_a_time() -> None:
    for keyword in plain_schemas.RULES:
        for value in EDGE_VALUES:
            for schema in ({keyword: value}, {"properties": {"p": {keyword: value}}}):
                assert_meta_schemas_agree(schema)
                assert_meta_schemas_agree({**schema, "$schema": DRAFT_07})


@settings(max_examples=1000, deadline=None)
@given(edge_schemas)
def test_the_fast_path_accepts_only_what_the_meta_schemas_accept(schema: dict[str, Any]) -> None:
    assert_meta_schemas_agree(schema)
    assert_meta_schemas_agree({**schema, "$schema": DRAFT_07})


def test_a_schema_without_a_type_is_taken_as_an_object_schema() -> None:
    check = compile_schema({"properties": {"a": {"type": "string"}}, "required": ["a"]})
    assert check.problem is None
    assert validate_arguments("t", check, {"a": "x"}) is None
    assert validate_arguments("t", check, {}) is not None


# -- the call-time fast path (a predicate per schema; the validator decides otherwise) ----

FAST_SCHEMAS: list[dict[str, Any]] = [
    ISSUE,
    EVERYTHING_ADD,
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    {"type": "object"},
    {
        "type": "object",
        "properties": {
            "n": {"type": ["integer", "null"], "minimum": 1, "exclusiveMaximum": 10},
            "s": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^a"},
            "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 1, "maxItems": 2},
            "kind": {"const": "k"},
            "meta": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "any": {},
            "untyped": {"minLength": 2, "maximum": 3, "items": {"type": "string"}},
            "short": {"minLength": 2},
            "small": {"maximum": 3},
        },
        "additionalProperties": {"type": "number"},
    },
]
SLOW_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}},
    {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
    {"type": "object", "properties": {"a": {"enum": [1, True]}}},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"},
]


class _Text(str):
    pass


FAST_EDGE_VALUES = [
    *(0, 1, 2, 3, 4, 9, 10, 11, 1.0, 1.5, 9.5, 10.0, -1, math.nan, True, False, None),
    *("", "a", "ab", "abc", "abcd", "abcde", "b", "x", "y", "k", "open"),
    *(_Text("a"), _Text("abc"), Decimal("5")),  # not plain JSON: the validator decides
]
fast_json_values = st.recursive(
    st.sampled_from(FAST_EDGE_VALUES),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.sampled_from(["a", "b", "n", "s", "x", "owner", "stars"]), inner)
    ),
    max_leaves=6,
)


def _arguments_for(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    names = [*schema.get("properties", {}), "zz"]
    # One key at a time, mostly: the fast check answers True only when every key passes.
    one = st.builds(lambda key, value: {key: value}, st.sampled_from(names), fast_json_values)
    return one | st.dictionaries(st.sampled_from(names), fast_json_values, max_size=3)


@pytest.mark.parametrize("schema", FAST_SCHEMAS)
def test_common_schemas_get_a_fast_check(schema: dict[str, Any]) -> None:
    assert check(schema).fast is not None


@pytest.mark.parametrize("schema", SLOW_SCHEMAS)
def test_other_keywords_get_no_fast_check(schema: dict[str, Any]) -> None:
    assert compile_schema(schema).fast is None


@settings(max_examples=2000, deadline=None)
@given(st.data())
def test_the_fast_check_accepts_only_what_the_validator_accepts(data: st.DataObject) -> None:
    schema = data.draw(st.sampled_from(FAST_SCHEMAS))
    arguments = data.draw(_arguments_for(schema))
    compiled = check(schema)
    assert compiled.fast is not None
    valid = validator_for(schema, default=Draft202012Validator)(schema).is_valid(arguments)
    if compiled.fast(arguments):
        assert valid
    # Whatever the fast check says, the answer is the validator's.
    slow = SchemaCheck(compiled.validator, None, compiled.draft)
    assert validate_arguments("t", compiled, arguments) == validate_arguments("t", slow, arguments)


FAST_EDGE_CONTAINERS = [
    [], ["x"], ["x", "y", "x"], ["a"], [1], ("x",), {}, {"m": True}, {"m": 1}, {"owner": "me"},
    {"owner": "me", "stars": -1}, {"owner": "me", "stars": 1.0}, {"owner": _Text("me")},
]  # fmt: skip


@pytest.mark.parametrize("schema", FAST_SCHEMAS)
def test_the_fast_check_is_sound_key_by_key(schema: dict[str, Any]) -> None:
    compiled = check(schema)
    assert compiled.fast is not None
    validator = validator_for(schema, default=Draft202012Validator)(schema)
    required = {key: "abc" for key in schema.get("required", [])}
    for key in [*schema.get("properties", {}), "zz"]:
        for value in [*FAST_EDGE_VALUES, *FAST_EDGE_CONTAINERS]:
            for arguments in ({key: value}, {**required, key: value}):
                if compiled.fast(arguments):
                    assert validator.is_valid(arguments), arguments


def test_the_fast_check_accepts_common_valid_arguments() -> None:
    issue = check(ISSUE).fast
    assert issue is not None
    assert issue({"repo": {"owner": "me", "stars": 3}, "title": "x", "labels": ["a"], "state": "open"})
    add = check(EVERYTHING_ADD).fast
    assert add is not None
    assert add({"a": 1, "b": 2.5})
    wide = check(FAST_SCHEMAS[4]).fast
    assert wide is not None
    valid = {"n": 9, "s": "abc", "tags": ["x"], "kind": "k", "meta": {"m": True}, "any": [1], "zz": 1.5}
    assert wide({**valid, "untyped": "ab"})
    assert wide({**valid, "n": None, "untyped": 3})


def test_the_fast_check_leaves_edge_values_to_the_validator() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}
    compiled = check(schema)
    assert compiled.fast is not None
    assert compiled.fast({"n": 3, "s": "x"})
    assert not compiled.fast({"n": 1.0})  # an integer to JSON Schema, decided by the validator
    assert validate_arguments("t", compiled, {"n": 1.0}) is None
    assert not compiled.fast({"n": True})
    message = validate_arguments("t", compiled, {"n": True})
    assert message == "invalid arguments for t: $.n: True is not of type 'integer'"
    assert not compiled.fast({"s": _Text("x")})
    assert validate_arguments("t", compiled, {"s": _Text("x")}) is None


def test_a_schema_uri_that_is_no_uri_is_a_problem() -> None:
    compiled = compile_schema({"$schema": "http://[::1", "type": "object"})
    assert compiled.validator is None
    assert compiled.problem == 'inputSchema is not a valid JSON Schema: $["$schema"]: not a URI'
