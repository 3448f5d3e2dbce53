"""The plain subset of JSON Schema: schemas valid by inspection, without the meta-schema.

Checking a schema against the 2020-12 meta-schema takes ~2.4 ms here (draft-07:
~0.5 ms), which a 10,000-tool catalog or a list_changed storm cannot afford. Nearly
every real inputSchema (zod-to-json-schema, pydantic, hand-written) uses a few
keywords with plainly right values; such a schema is valid under both dialects below
by inspection, in microseconds. Anything else (another keyword, an odd value, another
dialect) goes to the meta-schema. The rules only ever accept a subset of what the
meta-schemas accept (tests check this against jsonschema).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

PLAIN_DIALECTS = frozenset(
    {
        None,
        "https://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
    }
)
_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_LOCAL_REF = re.compile(r"#(/[A-Za-z0-9_.$~-]*)*")
MAX_PLAIN_DEPTH = 32


def plainly_valid(node: Any, depth: int) -> bool:
    """True only if every keyword is in ``RULES`` and its value passes the rule."""
    if isinstance(node, bool):
        return True
    if not isinstance(node, dict) or depth > MAX_PLAIN_DEPTH:
        return False
    for keyword, value in node.items():
        rule = RULES.get(keyword)
        if rule is None or not rule(value, depth + 1):
            return False
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_type(value: Any) -> bool:
    if isinstance(value, str):
        return value in _TYPES
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(t, str) and t in _TYPES for t in value)
        and len(set(value)) == len(value)
    )


def _is_pattern(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:  # what the meta-schema's "regex" format check does
        re.compile(value)
    except re.error:
        return False
    return True


def _is_schema_map(value: Any, depth: int) -> bool:
    return isinstance(value, dict) and all(plainly_valid(v, depth) for v in value.values())


def _is_schema_list(value: Any, depth: int) -> bool:
    return isinstance(value, list) and len(value) > 0 and all(plainly_valid(v, depth) for v in value)


def is_required(value: Any) -> bool:
    return (
        isinstance(value, list) and all(isinstance(v, str) for v in value) and len(set(value)) == len(value)
    )


RULES: dict[str, Callable[[Any, int], bool]] = {
    "type": lambda v, d: _is_type(v),
    "properties": _is_schema_map,
    "$defs": _is_schema_map,
    "definitions": _is_schema_map,
    "required": lambda v, d: is_required(v),
    "items": plainly_valid,
    "additionalProperties": plainly_valid,
    "not": plainly_valid,
    "anyOf": _is_schema_list,
    "oneOf": _is_schema_list,
    "allOf": _is_schema_list,
    "$ref": lambda v, d: isinstance(v, str) and _LOCAL_REF.fullmatch(v) is not None,
    "$schema": lambda v, d: d == 1 and isinstance(v, str) and v in PLAIN_DIALECTS,
    "enum": lambda v, d: isinstance(v, list),
    "examples": lambda v, d: isinstance(v, list),
    "const": lambda v, d: True,
    "default": lambda v, d: True,
    "title": lambda v, d: isinstance(v, str),
    "description": lambda v, d: isinstance(v, str),
    "$comment": lambda v, d: isinstance(v, str),
    "format": lambda v, d: isinstance(v, str),
    "pattern": lambda v, d: _is_pattern(v),
    "minimum": lambda v, d: _is_number(v),
    "maximum": lambda v, d: _is_number(v),
    "exclusiveMinimum": lambda v, d: _is_number(v),
    "exclusiveMaximum": lambda v, d: _is_number(v),
    "multipleOf": lambda v, d: _is_number(v) and v > 0,
    "minLength": lambda v, d: is_count(v),
    "maxLength": lambda v, d: is_count(v),
    "minItems": lambda v, d: is_count(v),
    "maxItems": lambda v, d: is_count(v),
    "minProperties": lambda v, d: is_count(v),
    "maxProperties": lambda v, d: is_count(v),
    "uniqueItems": lambda v, d: isinstance(v, bool),
    "readOnly": lambda v, d: isinstance(v, bool),
    "writeOnly": lambda v, d: isinstance(v, bool),
    "deprecated": lambda v, d: isinstance(v, bool),
}
