"""Tool schemas rich in the keywords a client must hand on untouched (issue: schemas pass
through): 2020-12 with ``$id``, ``$defs``, ``$ref``, ``$anchor``, ``$dynamicRef``,
composition, conditionals and ``unevaluatedProperties``; draft-07 with ``definitions``.

``as_text`` is the comparison the tests use: JSON text in the value's own key order, so
a dropped keyword, a reordered object, a dereferenced ``$ref`` or ``1.0`` turned into
``1`` all show as a difference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"

# The focal tool's inputSchema of the conformance suite's json-schema-2020-12-preservation
# scenario (@modelcontextprotocol/conformance 0.2.0-alpha.12), as the suite serves it.
SUITE_ADDRESS: dict[str, Any] = {
    "$anchor": "addressDef",
    "type": "object",
    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
}
SUITE_FOCAL: dict[str, Any] = {
    "$schema": DRAFT_2020_12,
    "type": "object",
    "$defs": {"address": SUITE_ADDRESS},
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

RICH_INPUT: dict[str, Any] = {
    "$schema": DRAFT_2020_12,
    "$id": "https://example.com/schemas/contact",
    "$comment": "every keyword below must survive",
    "title": "Contact",
    "type": "object",
    "$defs": {
        "address": {**SUITE_ADDRESS, "required": ["city"]},
        "tree": {
            "$dynamicAnchor": "node",
            "type": "object",
            "properties": {
                "label": {"type": "string"},
                "children": {"type": "array", "items": {"$dynamicRef": "#node"}},
            },
        },
    },
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "address": {"$ref": "#/$defs/address"},
        "home": {"$ref": "#addressDef"},
        "tags": {"$ref": "#/$defs/tree"},
        "contactMethod": {"enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string", "format": "email"},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        "count": {"type": "integer", "exclusiveMinimum": 0, "multipleOf": 1.0},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "oneOf": [{"required": ["name"]}, {"not": {"required": ["name"]}}],
    "not": {"required": ["forbidden"]},
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "dependentSchemas": {"phone": {"properties": {"phone": {"pattern": "^[+0-9 ]+$"}}}},
    "dependentRequired": {"address": ["name"]},
    "unevaluatedProperties": False,
    "x-vendor": {"kept": True},
}
RICH_OUTPUT: dict[str, Any] = {
    "$schema": DRAFT_2020_12,
    "type": "object",
    "$defs": {"amount": {"$anchor": "amount", "type": "number"}},
    "properties": {"total": {"$ref": "#amount"}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    "required": ["total"],
    "unevaluatedProperties": False,
}
LEGACY_INPUT: dict[str, Any] = {
    "$schema": DRAFT_07,
    "$id": "http://example.com/legacy.json",
    "type": "object",
    "definitions": {"slug": {"type": "string", "pattern": "^[a-z]+$"}},
    "properties": {
        "id": {"$ref": "#/definitions/slug"},
        "n": {"type": "number", "exclusiveMinimum": 0},
        "list": {"type": "array", "items": [{"type": "string"}], "additionalItems": False},
        "mode": {"const": "x"},
    },
    "required": ["id"],
    "dependencies": {"n": ["id"]},
    "if": {"required": ["mode"]},
    "then": {"required": ["n"]},
    "additionalProperties": False,
}
LEGACY_OUTPUT: dict[str, Any] = {
    "$schema": DRAFT_07,
    "type": "object",
    "definitions": {"ok": {"type": "boolean"}},
    "properties": {"ok": {"$ref": "#/definitions/ok"}},
}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "contact",
        "description": "Store a contact (a 2020-12 schema).",
        "inputSchema": RICH_INPUT,
        "outputSchema": RICH_OUTPUT,
    },
    {
        "name": "legacy",
        "description": "Store a legacy record (a draft-07 schema).",
        "inputSchema": LEGACY_INPUT,
        "outputSchema": LEGACY_OUTPUT,
    },
]
SCHEMAS = {tool["name"]: (tool["inputSchema"], tool["outputSchema"]) for tool in TOOLS}

# Arguments the rich schema accepts only when $ref, $anchor and $dynamicRef resolve.
RICH_VALID = {
    "name": "Ada",
    "contactMethod": "email",
    "email": "ada@example.com",
    "home": {"city": "London"},
    "tags": {"label": "a", "children": [{"label": "b"}]},
    "pair": ["x", 1],
}


def as_text(value: Any) -> str:
    """JSON in the value's own key order (types kept: 1, 1.0 and true differ)."""
    return json.dumps(value, ensure_ascii=False)


def write_tools_file(directory: Path) -> Path:
    """The tools above for ``mini_server.py --tools-file``."""
    path = directory / "schema_tools.json"
    path.write_text(json.dumps(TOOLS), encoding="utf-8")
    return path


def assert_schemas_kept(item: dict[str, Any], name: str) -> None:
    """``item`` (a listing entry, a search match, an API tool) carries the tool's schemas
    exactly as the server sent them."""
    input_schema, output_schema = SCHEMAS[name]
    assert as_text(item["input_schema"]) == as_text(input_schema), item["input_schema"]
    assert as_text(item["output_schema"]) == as_text(output_schema), item["output_schema"]
