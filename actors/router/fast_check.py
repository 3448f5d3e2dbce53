"""The call-time fast path: a plain predicate per schema, in place of jsonschema.

jsonschema's ``iter_errors`` + ``best_match`` costs ~10 us per call even for
``{"text": "hi"}``. For the keywords most tool schemas use, a plain predicate is
compiled once per schema; it answers True only when the validator would accept too
(exact JSON types only: a subclass, a Decimal or a float for "integer" makes it answer
False), and False sends the call to the validator, which then writes the message. Any
other keyword (``$ref``, ``anyOf``, ``patternProperties`` …) means no fast path for
that schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from actors.router.plain_schemas import MAX_PLAIN_DEPTH, is_count, is_required

Test = Callable[[Any], bool]
_JSON_TYPES = frozenset((str, int, float, bool, type(None), dict, list))
_ANNOTATIONS = frozenset(
    {"title", "description", "$comment", "format", "default", "examples"}
    | {"readOnly", "writeOnly", "deprecated"}
)
_TYPE_TESTS: dict[str, Test] = {
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
}


def _accept(value: Any) -> bool:
    return True


def fast_check(schema: dict[str, Any]) -> Callable[[dict[str, Any]], bool] | None:
    """The fast predicate for a whole ``inputSchema``, or None (see above)."""
    # Arguments are a plain dict by the time this runs: "type": "object" holds already.
    top = {k: v for k, v in schema.items() if k != "$schema" and (k, v) != ("type", "object")}
    try:
        return _fast_node(top, 0)
    except (re.error, RecursionError, TypeError):
        return None


def _guarded(kind: type, test: Test) -> Test:
    """A keyword that constrains one JSON type only: other JSON values pass it, anything
    outside plain JSON types fails (the validator decides those)."""

    def check(value: Any) -> bool:
        if type(value) is kind:
            return test(value)
        return type(value) in _JSON_TYPES and not isinstance(value, kind)

    return check


def _number_guarded(test: Test) -> Test:
    def check(value: Any) -> bool:
        kind = type(value)
        if kind is int or kind is float:
            return test(value)
        return kind in _JSON_TYPES  # bool is no number here, as in JSON Schema

    return check


def _fast_node(node: Any, depth: int) -> Test | None:
    if node is True:
        return _accept
    if not isinstance(node, dict) or depth > MAX_PLAIN_DEPTH:
        return None
    tests: list[Test] = []
    keys = set(node) - _ANNOTATIONS
    for keyword in keys - {"properties", "required", "additionalProperties"}:
        test = _fast_keyword(keyword, node[keyword], depth)
        if test is None:
            return None
        tests.append(test)
    if keys & {"properties", "required", "additionalProperties"}:
        test = _fast_object(node, depth)
        if test is None:
            return None
        tests.append(test)
    if not tests:
        return _accept
    if len(tests) == 1:
        return tests[0]
    all_tests = tuple(tests)
    return lambda value: all(test(value) for test in all_tests)


def _fast_keyword(keyword: str, value: Any, depth: int) -> Test | None:
    if keyword == "type":
        if isinstance(value, str):
            return _TYPE_TESTS.get(value)
        if isinstance(value, list) and value and all(isinstance(t, str) and t in _TYPE_TESTS for t in value):
            tests = tuple(_TYPE_TESTS[t] for t in value)
            return lambda v: any(test(v) for test in tests)
        return None
    if keyword == "enum" and isinstance(value, list) and value and all(type(e) is str for e in value):
        choices = frozenset(value)
        return lambda v: type(v) is str and v in choices
    if keyword == "const" and type(value) is str:
        return lambda v: type(v) is str and v == value
    if keyword in ("minLength", "maxLength", "minItems", "maxItems") and is_count(value):
        limit: int = value
        kind: type = str if keyword.endswith("Length") else list
        if keyword.startswith("min"):
            return _guarded(kind, lambda v: len(v) >= limit)
        return _guarded(kind, lambda v: len(v) <= limit)
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") and (
        type(value) is int or type(value) is float
    ):
        bound: float = value
        compare: Test = {
            "minimum": lambda v: v >= bound,
            "maximum": lambda v: v <= bound,
            "exclusiveMinimum": lambda v: v > bound,
            "exclusiveMaximum": lambda v: v < bound,
        }[keyword]
        return _number_guarded(compare)
    if keyword == "pattern" and isinstance(value, str):
        search = re.compile(value).search
        return _guarded(str, lambda v: search(v) is not None)
    if keyword == "items" and (isinstance(value, dict) or value is True):
        item = _fast_node(value, depth + 1)
        if item is None:
            return None
        each = item
        return _guarded(list, lambda v: all(each(x) for x in v))
    return None


def _fast_object(node: dict[str, Any], depth: int) -> Test | None:
    properties = node.get("properties", {})
    required = node.get("required", [])
    additional = node.get("additionalProperties", True)
    if not isinstance(properties, dict) or not is_required(required):
        return None
    tests: dict[str, Test] = {}
    for key, sub in properties.items():
        test = _fast_node(sub, depth + 1)
        if test is None:
            return None
        if test is not _accept:
            tests[key] = test
    if additional is True:
        extra: Test | None = None
    elif additional is False:
        extra = _reject
    else:
        extra = _fast_node(additional, depth + 1)
        if extra is None:
            return None
        if extra is _accept:
            extra = None
    names = frozenset(properties)
    must = tuple(required)

    def check(arguments: dict[str, Any]) -> bool:
        for key in must:
            if key not in arguments:
                return False
        for key, value in arguments.items():
            test = tests.get(key)
            if test is not None:
                if not test(value):
                    return False
            elif extra is not None and key not in names and not extra(value):
                return False
        return True

    return _guarded(dict, check)


def _reject(value: Any) -> bool:
    return False
