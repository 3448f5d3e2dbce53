"""A journal line's bytes: one JSON object per line, the audit row's fields.

Kept apart from the journal (``journal.py``) so the call path can build a call's two
lines from one dict (``line_fields``) and the rest can encode an ``AuditRow``
(``encode``), both through the same function, so they write the same bytes.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

import orjson

from supervisor.store.records import AuditRow

__all__ = ["LineFields", "encode", "encode_fields", "line_fields"]


class LineFields(TypedDict):
    """One journal line's JSON object, in its key order (``line_fields``)."""

    record: str | None
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
    trace_id: NotRequired[str]
    person: NotRequired[str]
    replica: NotRequired[str]
    cancelled_by: NotRequired[str]


def line_fields(
    record: str | None,
    at: float,
    tenant: str,
    session: str,
    tool: str,
    server: str,
    decision: str,
    outcome: str,
    duration_ms: int,
    args_sha256: str,
    args_bytes: int,
    result_bytes: int,
    trace_id: str | None = None,
    person: str | None = None,
    replica: str | None = None,
    cancelled_by: str | None = None,
) -> LineFields:
    """A line's fields (``trace_id``, ``person``, ``replica`` and ``cancelled_by`` only
    when set: lines without stay as short as before, and old lines read the same).

    The call path keeps this dict for a call's two lines and changes what its end
    changes (``cancelled_by`` only ever comes last), so no ``AuditRow`` is built for
    them; ``encode`` goes through here too, so both write the same bytes."""
    fields: LineFields = {
        "record": record,
        "at": at,
        "tenant": tenant,
        "session": session,
        "tool": tool,
        "server": server,
        "decision": decision,
        "outcome": outcome,
        "duration_ms": duration_ms,
        "args_sha256": args_sha256,
        "args_bytes": args_bytes,
        "result_bytes": result_bytes,
    }
    if trace_id is not None:
        fields["trace_id"] = trace_id
    if person is not None:
        fields["person"] = person
    if replica is not None:
        fields["replica"] = replica
    if cancelled_by is not None:
        fields["cancelled_by"] = cancelled_by
    return fields


def encode_fields(fields: LineFields) -> bytes:
    """One journal line."""
    return orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE)


def encode(row: AuditRow) -> bytes:
    """One journal line: the row's fields (``line_fields``)."""
    return encode_fields(
        line_fields(
            row.record,
            row.at,
            row.tenant,
            row.session,
            row.tool,
            row.server,
            row.decision,
            row.outcome,
            row.duration_ms,
            row.args_sha256,
            row.args_bytes,
            row.result_bytes,
            row.trace_id,
            row.person,
            row.replica,
            row.cancelled_by,
        )
    )
