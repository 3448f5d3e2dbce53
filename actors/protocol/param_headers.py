"""Tool parameters mirrored into HTTP headers (SEP-2243, the 2026-07-28 era).

A tool's ``inputSchema`` may mark a property with ``"x-mcp-header": "Region"``; a
``tools/call`` over Streamable HTTP then repeats that argument's value in an
``Mcp-Param-Region`` header, so proxies and load balancers can route on it without
reading the body. The server checks header against body and refuses a mismatch.

The rules, as the official SDK applies them:

* an annotation is valid only on a property reached from the root through
  ``properties`` alone (not inside ``items``, ``allOf``, ``$defs``…), of ``type``
  ``string``, ``integer`` or ``boolean`` (not ``number``: a float's text is not
  portable), naming a non-empty RFC 9110 token (no space, colon, control or
  non-ASCII character), unique across the schema ignoring case;
* a client leaves out every tool with an invalid annotation (``annotation_problem``);
* a value is sent as ``true``/``false`` for a boolean, as its text otherwise, in the
  ``=?base64?…?=`` form when it would not survive a header (``header_value``); a
  missing or null argument sends no header.

Pure functions; the Streamable HTTP transport reads designations off the
``tools/list`` answers it carries and adds the headers to each ``tools/call``; the
gateway's ``/mcp`` checks a client's headers against the body (``header_mismatch``):
a designated argument in the body needs its header, a header needs its argument, a
``=?base64?…?=`` value must be strict Base64 (the standard alphabet, its padding) of
UTF-8, any other value is literal (OWS around it dropped), and the texts must match.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from typing import Any, TypeAlias

from actors.protocol.http_framing import header_value

ANNOTATION = "x-mcp-header"
HEADER_PREFIX = "Mcp-Param-"

Designations: TypeAlias = dict[tuple[str, ...], str]
"""Property path (a chain of ``properties`` keys) -> the header token it is mirrored as."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_HEADER_TYPES = frozenset({"string", "integer", "boolean"})
# JSON Schema 2020-12 keywords whose values are subschemas, by shape. Crossing any of
# them leaves the plain ``properties`` chain an annotation must sit on. ``$ref`` is
# never followed (nor fetched).
_ONE = frozenset(
    {"items", "contains", "unevaluatedItems", "additionalProperties", "propertyNames"}
    | {"unevaluatedProperties", "not", "if", "then", "else", "contentSchema"}
)
_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_MAP = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})


def _positions(schema: Any) -> Iterator[tuple[tuple[str, ...] | None, Mapping[str, Any]]]:
    """Every subschema with its ``properties`` path (None once off that chain)."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        yield path, node
        for key, value in node.items():
            if key == "properties" and isinstance(value, Mapping):
                stack.extend(((*path, k) if path is not None else None, v) for k, v in value.items())
            elif key in _ONE:
                stack.append((None, value))
            elif key in _LIST and isinstance(value, list):
                stack.extend((None, v) for v in value)
            elif key in _MAP and isinstance(value, Mapping):
                stack.extend((None, v) for v in value.values())


def annotation_problem(schema: Any) -> str | None:
    """Why the schema's ``x-mcp-header`` annotations are invalid, or None if they are
    valid (or absent)."""
    seen: dict[str, str] = {}
    for path, node in _positions(schema):
        if ANNOTATION not in node:
            continue
        if not path:
            return f"{ANNOTATION} is only allowed on a property reached through 'properties' alone"
        where = ".".join(path)
        token = node[ANNOTATION]
        if not isinstance(token, str):
            return f"property {where!r}: {ANNOTATION} must be a string, not {type(token).__name__}"
        if not _TOKEN.match(token):
            return (
                f"property {where!r}: {ANNOTATION} {token!r} is not a valid header name "
                "(non-empty; ASCII letters, digits and !#$%&'*+-.^_`|~ only)"
            )
        kind = node.get("type")
        if kind not in _HEADER_TYPES:
            return f"property {where!r}: {ANNOTATION} belongs on a string, integer or boolean, not {kind}"
        if token.lower() in seen:
            first = seen[token.lower()]
            return f"property {where!r}: {ANNOTATION} {token!r} repeats the one of property {first!r}"
        seen[token.lower()] = where
    return None


def designations(schema: Any) -> Designations:
    """The annotated properties of a schema ``annotation_problem`` accepts."""
    return {
        path: node[ANNOTATION]
        for path, node in _positions(schema)
        if path and isinstance(node.get(ANNOTATION), str)
    }


def listing_designations(result: Mapping[str, Any]) -> dict[str, Designations | None]:
    """Per tool of one ``tools/list`` page: its designations, or None for a tool whose
    annotations are invalid (it is left out of the listing, so nothing is sent for it)."""
    found: dict[str, Designations | None] = {}
    tools = result.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            continue
        schema = tool.get("inputSchema")
        found[tool["name"]] = None if annotation_problem(schema) else designations(schema)
    return found


def _text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None  # an object or array has no header form


def param_headers(designated: Designations, arguments: Any) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers of a call with these arguments: one per designated
    property that has a value (a missing or null one sends nothing)."""
    headers: dict[str, str] = {}
    for path, token in designated.items():
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        text = _text(value) if value is not None else None
        if text is not None:
            headers[HEADER_PREFIX + token] = header_value(text)
    return headers


_WRAPPED = re.compile(r"=\?base64\?(.*)\?=\Z", re.DOTALL)


def received_value(value: str) -> str:
    """A received ``Mcp-Param-*`` value as text: the ``=?base64?…?=`` form decoded,
    any other literally; ValueError (saying why) for bad Base64 or UTF-8."""
    value = value.strip(" \t")
    wrapped = _WRAPPED.match(value)
    if wrapped is None:
        return value
    try:
        return base64.b64decode(wrapped.group(1), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError(f"its =?base64?...?= value is not valid Base64 of UTF-8 text ({exc})") from None


def header_mismatch(designated: Designations, arguments: Any, received: Mapping[str, str]) -> str | None:
    """Why the ``Mcp-Param-*`` headers of a call (``received``: names lowercased) do not
    repeat its arguments, naming the header, or None when they do."""
    for path, token in designated.items():
        header, where = HEADER_PREFIX + token, ".".join(path)
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        expected = _text(value) if value is not None else None
        sent = received.get(header.lower())
        if sent is None:
            if expected is not None:
                return f"the {header} header is missing, but argument {where!r} is in the body: send both"
            continue
        try:
            text = received_value(sent)
        except ValueError as exc:
            return f"the {header} header is malformed: {exc}"
        if expected is None:
            return f"the {header} header is sent, but argument {where!r} is not in the body"
        if text != expected:
            return f"the {header} header ({sent!r}) does not match argument {where!r} ({expected!r})"
    return None
