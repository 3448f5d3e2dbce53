"""Request bodies of the admin API: everything a client can get wrong ends as a 4xx.

Each problem is an ``ApiError`` (``supervisor/web/errors.py``), which the app turns into
``{"error": {"code", "message"}}``. Body readers name the offending field
(``$.host_tools: must be an integer >= 0``), so a client can fix its request without
reading our source.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from actors.protocol.json_depth import nested_too_deep, too_deep
from supervisor.web.errors import ApiError

MAX_BODY_BYTES = 1 << 20
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}\Z")


class MalformedJson(ApiError):
    """400: the body is not JSON, or nests deeper than the parser reads (saying which)."""

    def __init__(self, problem: orjson.JSONDecodeError) -> None:
        why = nested_too_deep("the body") if too_deep(problem) else f"malformed JSON: {problem}"
        super().__init__(400, "bad_request", why)


def flag(query: Mapping[str, str], name: str) -> bool:
    """A yes/no query parameter: absent or ``0``/``false`` is no, ``1``/``true`` yes."""
    value = query.get(name)
    if value is None or value.lower() in ("0", "false"):
        return False
    if value.lower() in ("1", "true"):
        return True
    raise ApiError(400, "bad_request", f"query parameter {name}: must be 1 or 0 (or true, false)")


def bad_field(field: str, problem: str) -> ApiError:
    """400 naming the field."""
    return ApiError(400, "bad_request", f"$.{field}: {problem}")


def parse_object(raw: bytes, *, optional: bool = False, prune_depth: int | None = None) -> dict[str, Any]:
    """The request body as a JSON object; an empty optional body is ``{}``.

    orjson reads at most ``JSON_MAX_DEPTH`` levels (``actors/protocol/json_depth.py``).
    With ``prune_depth``, a body nested deeper is read with every array or object below
    that depth replaced by ``null`` (a call's arguments then stay too deep, and are
    refused as such, with the raw body hashed for the audit); without it, such a body
    is a 400 that says so.
    """
    if not raw.strip():
        if optional:
            return {}
        raise ApiError(400, "bad_request", "a JSON object body is required")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        pruned = prune_nesting(raw, prune_depth) if prune_depth is not None else raw
        if pruned is raw:
            raise MalformedJson(exc) from None
        try:
            value = orjson.loads(pruned)
        except orjson.JSONDecodeError:
            raise MalformedJson(exc) from None
    if not isinstance(value, dict):
        raise ApiError(400, "bad_request", "$: must be a JSON object")
    return value


# A JSON string (escapes included), or a run of opening or of closing brackets.
_STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[{]+|[\]}]+')


def prune_nesting(raw: bytes, depth: int) -> bytes:
    """``raw`` with each array or object that opens deeper than ``depth`` replaced by
    ``null``; ``raw`` itself (the same object) when nothing is that deep, or when its
    brackets do not balance (then it is malformed anyway). Strings are skipped whole,
    so brackets inside them do not count. Linear in the body: one regular-expression
    pass in C, and a Python step per string or run of brackets."""
    level = 0
    cut = -1  # where the pruned container began
    pieces: list[bytes] = []
    kept = 0  # raw[kept:cut] is still to be copied
    for match in _STRUCTURE.finditer(raw):
        start, end = match.span()
        first = raw[start]
        if first == 0x22:  # a string
            continue
        run = end - start
        if first in (0x5B, 0x7B):  # [ or {
            if cut < 0 and level + run > depth:
                cut = start + (depth - level)
            level += run
        else:
            if cut >= 0 and level - run <= depth:
                close = start + (level - depth - 1)  # the bracket that ends the pruned one
                pieces += (raw[kept:cut], b"null")
                kept, cut = close + 1, -1
            level -= run
            if level < 0:
                return raw
    if not pieces or cut >= 0 or level:
        return raw
    pieces.append(raw[kept:])
    return b"".join(pieces)


def string(body: Mapping[str, Any], field: str, *, required: bool = True) -> str | None:
    """A string field (absent → None unless required)."""
    value = body.get(field)
    if value is None:
        if required:
            raise bad_field(field, "is required (a string)")
        return None
    if not isinstance(value, str):
        raise bad_field(field, "must be a string")
    return value


def choice(body: Mapping[str, Any], field: str, options: tuple[str, ...], default: str | None) -> str:
    """A string field restricted to ``options``."""
    value = body.get(field, default)
    if value is None:
        raise bad_field(field, f"is required (one of {', '.join(options)})")
    if not isinstance(value, str) or value not in options:
        raise bad_field(field, f"must be one of {', '.join(options)}")
    return value


def natural(body: Mapping[str, Any], field: str, default: int) -> int:
    """A non-negative integer field (booleans are not integers here)."""
    value = body.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise bad_field(field, "must be an integer >= 0")
    return value


def strings(body: Mapping[str, Any], field: str) -> list[str]:
    """A list-of-strings field (absent → empty)."""
    value = body.get(field, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise bad_field(field, "must be an array of strings")
    return value


def arguments(body: Mapping[str, Any], field: str = "arguments") -> Any:
    """The tool arguments as sent (absent or null → ``{}``). Not checked here: a call
    that names a tool is a call attempt, so wrong arguments get the call's own
    ``invalid_arguments`` envelope and audit row, not a 400."""
    value = body.get(field)
    return {} if value is None else value


def request_id(body: Mapping[str, Any], field: str = "request_id") -> str | None:
    """A client-chosen request id: it is echoed in a header, so its alphabet is narrow."""
    value = string(body, field, required=False)
    if value is not None and not REQUEST_ID.match(value):
        raise bad_field(field, "must be 1-128 characters of A-Z a-z 0-9 . _ : -")
    return value
