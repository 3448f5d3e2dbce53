"""The store's row types and the canonical JSON it hashes and saves."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

DECISIONS = ("allow", "ask", "deny", "none")
"""Trust decisions an audit row may record (the ``trust.Action`` values); ``none`` when
the call was refused before any (unknown tool, invalid arguments)."""

APPROVAL_DECISIONS = ("allow", "deny")
POLICY_CHANNEL = "mcp_supervisor_policy"
"""Where a write of a pin or an "always" answer is announced (``policy_feed.py``)."""
"""What a remembered ("always") approval may say: ``ask`` is a question, not an answer."""


AUDIT_COLUMNS = (
    "at, tenant, session, tool, server, decision, outcome, duration_ms, args_sha256, args_bytes,"
    " result_bytes, record, trace_id, person, replica, cancelled_by"
)
"""The audit table's columns in ``AuditRow``'s order."""


@attrs.frozen(slots=True)
class AuditRow:
    """One call attempt, as audited: every attempt leaves exactly one row, also one refused
    before the server is asked (see "One call's path" in ``docs/architecture.md``).
    Arguments appear only as a hash.

    ``at`` is unix time; ``outcome`` is ``"ok"``, an envelope error code, or
    ``"interrupted"`` for a call the supervisor died during. ``record`` is the id of the
    row's journal record (unique; None for rows written without a journal).
    ``trace_id`` is the trace the call was part of (32 hex digits; None untraced).
    ``person`` is who the call was made for (see "Who a caller is" in
    ``docs/identity.md``; None in rows from before people were recorded).
    ``replica`` is the replica that answered the call (None for a single process).
    ``cancelled_by`` is who cancelled it by its call id (``POST /v1/calls/{id}/cancel``:
    ``<role> <tenant>``; None otherwise).
    """

    at: float
    tenant: str
    session: str
    tool: str
    server: str
    decision: str
    outcome: str
    duration_ms: int
    args_sha256: str
    args_bytes: int
    result_bytes: int
    record: str | None = None
    trace_id: str | None = None
    person: str | None = None
    replica: str | None = None
    cancelled_by: str | None = None


def person_field(person: str | None, tenant: str) -> dict[str, str]:
    """``{"person": …}`` for an event or listing, only when it says something new: a
    caller whose person is its tenant's name (every static-token caller) leaves it out,
    so what such callers saw before stays byte for byte the same."""
    return {} if person in (None, "", tenant) else {"person": str(person)}


def _plain(value: object) -> object:
    # json only knows dict; arguments may arrive as any Mapping (e.g. a MappingProxyType).
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def canonical_json(value: object) -> str:
    """Compact JSON with sorted keys: equal data gives equal text, whatever the key order."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_plain)


def ordered_json(value: object) -> str:
    """Compact JSON in the value's own key order: for data handed back as it came
    (a server's tool list, whose schemas we never reorder)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_plain)


def hash_arguments(arguments: Mapping[str, Any]) -> tuple[str, int]:
    """SHA-256 hex digest and UTF-8 byte length of the arguments' canonical JSON.

    The audit keeps only this, so the store never holds what a model sent a tool
    (secrets, personal data) yet identical calls can still be matched.
    """
    # surrogatepass: a lone surrogate from a host's Python str must not fail the call path.
    data = canonical_json(arguments).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest(), len(data)


_SCALARS = frozenset((str, int, bool, type(None)))
_MAX_FAST_DEPTH = 32


def _encodes_alike(value: Any, depth: int) -> bool:
    """True when orjson's sorted compact JSON of ``value`` is byte for byte the standard
    library's (``supervisor.store.records.canonical_json``): plain dicts with str keys,
    lists, str, int, bool and None. Floats are left to the standard library (orjson
    writes 1e-05 as 0.00001 and NaN as null), and so are subclasses and other types."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if depth > _MAX_FAST_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not (type(item) in _SCALARS or _encodes_alike(item, depth + 1)):
                return False
        return True
    if kind is list:
        return all(type(item) in _SCALARS or _encodes_alike(item, depth + 1) for item in value)
    return False


MAX_HASHED_BYTES = 1 << 20
"""How much of a value ``bounded_hash`` reads: the admin API's largest request body."""


class _Literal:
    """A piece of JSON syntax on ``bounded_json``'s stack (not a value to encode)."""

    __slots__ = ("text",)

    def __init__(self, text: bytes) -> None:
        self.text = text


_OPEN_OBJECT, _CLOSE_OBJECT = _Literal(b"{"), _Literal(b"}")
_OPEN_ARRAY, _CLOSE_ARRAY = _Literal(b"["), _Literal(b"]")
_COMMA, _COLON = _Literal(b","), _Literal(b":")


def _scalar(value: object) -> bytes:
    if isinstance(value, str | int | float | bool) or value is None:
        return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return json.dumps(f"<{type(value).__name__}>").encode()


def bounded_json(value: object, limit: int = MAX_HASHED_BYTES) -> bytes:
    """The first ``limit`` bytes of ``value`` as compact JSON with sorted keys, written
    with an explicit stack instead of recursion: any depth, and a cycle ends at the
    limit. What cannot be JSON is written as a string naming its type."""
    out = bytearray()
    stack: list[object] = [value]
    while stack and len(out) < limit:
        item = stack.pop()
        if isinstance(item, _Literal):
            out += item.text
        elif isinstance(item, Mapping):
            try:
                keys = sorted(item)
            except TypeError:
                keys = sorted(item, key=str)
            stack.append(_CLOSE_OBJECT)
            for i, key in enumerate(reversed(keys)):
                if i:
                    stack.append(_COMMA)
                stack.extend((item[key], _COLON, _Literal(_scalar(str(key)))))
            stack.append(_OPEN_OBJECT)
        elif isinstance(item, list | tuple):
            stack.append(_CLOSE_ARRAY)
            for i, element in enumerate(reversed(item)):
                if i:
                    stack.append(_COMMA)
                stack.append(element)
            stack.append(_OPEN_ARRAY)
        else:
            out += _scalar(item)
    return bytes(out[:limit])


def bounded_hash(value: object) -> tuple[str, int]:
    """SHA-256 and length of ``bounded_json(value)``: the audit's digest of arguments
    too deep (or too odd) for ``hash_arguments`` when no request bytes came with them."""
    data = bounded_json(value)
    return hashlib.sha256(data).hexdigest(), len(data)


def bytes_hash(data: bytes) -> tuple[str, int]:
    """SHA-256 and length of raw bytes (a request body as received)."""
    return hashlib.sha256(data).hexdigest(), len(data)


def audit_hash(arguments: Mapping[str, Any]) -> tuple[str, int]:
    """``hash_arguments`` (sha256 and size of the canonical JSON), the same digest, with
    orjson doing the encoding when it writes the very same bytes (a few µs less per
    call); anything else (floats, lone surrogates, integers beyond 64 bits, frozen
    mappings) goes through ``hash_arguments`` itself."""
    if type(arguments) is dict and _encodes_alike(arguments, 0):
        try:
            data = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # a lone surrogate, an integer beyond 64 bits
            return hash_arguments(arguments)
        return hashlib.sha256(data).hexdigest(), len(data)
    return hash_arguments(arguments)


MAX_AUDITED_NAME = 200
"""An unknown tool's name is kept in its audit row and call event cut to this many characters."""


def audited_name(tool_id: str) -> str:
    """A tool name as given by a caller, fit for the audit: bounded, and valid UTF-8
    (a host's Python str may hold lone surrogates, which neither SQLite nor JSON take)."""
    name = tool_id if len(tool_id) <= MAX_AUDITED_NAME else tool_id[: MAX_AUDITED_NAME - 1] + "…"
    return name.encode("utf-8", "replace").decode("utf-8")


def arguments_digest(arguments: Any) -> tuple[str, int]:
    """The audit's hash of arguments no deeper than the limit: ``audit_hash``, or the
    bounded encoding for values the standard library cannot write as JSON."""
    try:
        return audit_hash(arguments)
    except (TypeError, ValueError):
        return bounded_hash(arguments)
