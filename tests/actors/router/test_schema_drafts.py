"""Validation under the schema's own draft, references resolved offline, and the fast
path never changing an outcome.

``$schema`` picks the validator: 2020-12 (also when absent: MCP's default dialect,
SEP-1613, as the official SDK's ``validator_for``), 2019-09, draft-07, -06 and -04.
Each draft is told apart by a keyword it is the first to know.
"""

from __future__ import annotations

import socket
import urllib.request
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.router.plain_schemas import PLAIN_DIALECTS
from actors.router.schema_compiler import compile_schema
from actors.router.validation import SchemaCheck, validate_arguments

D2020 = "https://json-schema.org/draft/2020-12/schema"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D7 = "http://json-schema.org/draft-07/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D4 = "http://json-schema.org/draft-04/schema#"
ORDER = [D4, D6, D7, D2019, D2020]

# keyword → (schema, arguments it refuses, the first draft that knows the keyword).
# Drafts before that one ignore the keyword, so they accept the arguments.
FIRST_KNOWN: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    "const": ({"properties": {"a": {"const": 1}}}, {"a": 2}, D6),
    "if/then": ({"properties": {"a": {"if": {"type": "string"}, "then": {"minLength": 2}}}}, {"a": "x"}, D7),
    "$ref siblings": (
        {"properties": {"a": {"$ref": "#/properties/b", "maxLength": 1}, "b": {"type": "string"}}},
        {"a": "xyz"},
        D2019,
    ),
    "dependentRequired": ({"dependentRequired": {"a": ["b"]}}, {"a": 1}, D2019),
    "prefixItems": ({"properties": {"a": {"prefixItems": [{"type": "string"}]}}}, {"a": [1]}, D2020),
}


@pytest.mark.parametrize("dialect", [*ORDER, None])
@pytest.mark.parametrize("keyword", sorted(FIRST_KNOWN))
def test_dollar_schema_picks_the_draft(dialect: str | None, keyword: str) -> None:
    body, refused, first = FIRST_KNOWN[keyword]
    schema = {"type": "object", **body, **({"$schema": dialect} if dialect else {})}
    check = compile_schema(schema)
    assert check.problem is None
    assert check.draft == (dialect or D2020)
    knows = ORDER.index(dialect or D2020) >= ORDER.index(first)
    message = validate_arguments("srv_t", check, refused)
    assert (message is not None) == knows, (dialect, keyword, message)
    if knows:
        assert message is not None and message.startswith("invalid arguments for srv_t: $")


def test_draft_04_keeps_its_own_number_rules() -> None:
    schema = {
        "$schema": D4,
        "type": "object",
        "properties": {
            "n": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
            "i": {"type": "integer"},
        },
    }
    check = compile_schema(schema)
    assert validate_arguments("t", check, {"n": 0}) == (
        "invalid arguments for t: $.n: 0 is less than or equal to the minimum of 0"
    )
    assert (
        validate_arguments("t", check, {"i": 1.0})
        == "invalid arguments for t: $.i: 1.0 is not of type 'integer'"
    )
    # The boolean form is draft-04's only: under 2020-12 the same schema is a problem.
    later = compile_schema({**schema, "$schema": D2020})
    assert later.validator is None and later.problem is not None


REFS: list[tuple[str, dict[str, Any]]] = [
    (D2020, {"$defs": {"s": {"$anchor": "slug", "type": "string"}}, "properties": {"p": {"$ref": "#slug"}}}),
    (D2020, {"$defs": {"s": {"type": "string"}}, "properties": {"p": {"$ref": "#/$defs/s"}}}),
    (D2019, {"$defs": {"s": {"$anchor": "slug", "type": "string"}}, "properties": {"p": {"$ref": "#slug"}}}),
    (D7, {"definitions": {"s": {"$id": "#slug", "type": "string"}}, "properties": {"p": {"$ref": "#slug"}}}),
    (D7, {"definitions": {"s": {"type": "string"}}, "properties": {"p": {"$ref": "#/definitions/s"}}}),
    (D6, {"definitions": {"s": {"type": "string"}}, "properties": {"p": {"$ref": "#/definitions/s"}}}),
    (D4, {"definitions": {"s": {"id": "#slug", "type": "string"}}, "properties": {"p": {"$ref": "#slug"}}}),
]


@pytest.mark.parametrize(("dialect", "body"), REFS)
def test_refs_into_defs_and_anchors_resolve_in_every_draft(dialect: str, body: dict[str, Any]) -> None:
    check = compile_schema({"$schema": dialect, "type": "object", **body})
    assert check.problem is None, check.problem
    assert validate_arguments("t", check, {"p": "x"}) is None
    assert (
        validate_arguments("t", check, {"p": 1}) == "invalid arguments for t: $.p: 1 is not of type 'string'"
    )


@pytest.mark.parametrize("dialect", ORDER)
def test_a_remote_ref_names_the_tool_and_is_never_fetched(
    dialect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args[:2])
        raise OSError("no network in this test")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    defs = "definitions" if dialect in (D4, D6, D7) else "$defs"
    remote = "https://example.com/profile.json"
    schema = {
        "$schema": dialect,
        "type": "object",
        defs: {"profile": {"$ref": remote}},
        "properties": {"p": {"$ref": f"#/{defs}/profile"}},
    }
    check = compile_schema(schema)
    assert validate_arguments("srv_lookup", check, {"p": {}}) == (
        f"tool srv_lookup cannot be called: inputSchema refers to {remote}, which cannot be resolved "
        "(references are never fetched)"
    )
    assert attempts == []


# -- the fast path never changes an outcome -----------------------------------------------

FAST_DIALECTS = [None, D2020, D7, "http://json-schema.org/draft-07/schema", D2019, D6, D4]
NAMES = ["a", "b", "c"]
TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
numbers = st.sampled_from([-1, 0, 1, 2, 2.5, 3, 1.0, 0.0, 10**20])
scalars = st.sampled_from(
    [None, True, False, 0, 1, 1.0, 2, 2.5, -1, "", "a", "ab", "abc", "x", 10**20, 1e300]
)
leaf_schemas = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(TYPES)
        | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True),
        "enum": st.lists(st.sampled_from(["a", "ab", "x"]), min_size=1, max_size=3),
        "const": st.sampled_from(["a", "x"]),
        "minLength": st.integers(0, 3),
        "maxLength": st.integers(0, 3),
        "minItems": st.integers(0, 2),
        "maxItems": st.integers(0, 2),
        "minimum": numbers,
        "maximum": numbers,
        "exclusiveMinimum": numbers,
        "exclusiveMaximum": numbers,
        "pattern": st.sampled_from(["^a", "b$", "[0-9]", ""]),
        "format": st.sampled_from(["email", "uri", "date-time"]),
        "default": scalars,
        "description": st.just("d"),
    },
)


def _with(base: dict[str, Any], **parts: Any) -> dict[str, Any]:
    return {**base, **{k: v for k, v in parts.items() if v is not None}}


schemas = st.recursive(
    leaf_schemas,
    lambda inner: st.builds(
        lambda base, properties, required, additional, items: _with(
            base, properties=properties, required=required, additionalProperties=additional, items=items
        ),
        leaf_schemas,
        st.none() | st.dictionaries(st.sampled_from(NAMES), inner | st.just(True), max_size=3),
        st.none() | st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
        st.none() | st.booleans() | inner,
        st.none() | inner | st.just(True),
    ),
    max_leaves=6,
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from([*NAMES, "z"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(FAST_DIALECTS),
    schemas,
    st.dictionaries(st.sampled_from([*NAMES, "z"]), values, max_size=4),
)
def test_the_fast_path_gives_the_validators_answer(
    dialect: str | None, schema: dict[str, Any], arguments: dict[str, Any]
) -> None:
    """Generated schemas of the keywords the fast path knows, in every dialect, and
    generated arguments: with or without the fast path, the same answer."""
    top = _with(schema, type="object", **{"$schema": dialect})
    check = compile_schema(top)
    if check.validator is None:
        return
    assert (check.fast is not None) == (dialect in PLAIN_DIALECTS)  # not a vacuous test
    full = SchemaCheck(check.validator, None, check.draft)  # jsonschema alone
    assert validate_arguments("t", check, arguments) == validate_arguments("t", full, arguments), top
