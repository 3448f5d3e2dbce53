"""The JSON Schemas of what a console inspects (``GET /v1/calls``, ``POST
/v1/calls/{call_id}/cancel``, ``GET /v1/audit``, ``GET /v1/servers/{name}/latency``),
beside ``schemas.py``'s in the OpenAPI document."""

from __future__ import annotations

from typing import Any

from supervisor.admin.schemas import STR

_INT, _NUM = {"type": "integer"}, {"type": "number"}
_NULL_STR, _NULL_NUM = {"type": ["string", "null"]}, {"type": ["number", "null"]}


def _obj(description: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "required": list(properties),
        "properties": properties,
    }


_CALL = _obj(
    "One call in flight.",
    call_id={
        "type": "string",
        "description": "Assigned by this process (c1, c2, …); never reused while it runs.",
    },
    age_s=_NUM,
    server=STR,
    tool=STR,
    tenant=STR,
    session=STR,
    person=STR,
)
_ROW = _obj(
    "One audit row (arguments only as their hash).",
    at={"type": "number", "description": "Unix seconds."},
    tenant=STR,
    person=_NULL_STR,
    session=STR,
    server=STR,
    tool=STR,
    decision={"enum": ["allow", "ask", "deny", "none"]},
    outcome={"type": "string", "description": "ok, an envelope error code, or interrupted."},
    duration_ms=_INT,
    args_sha256=STR,
    args_bytes={"type": "integer", "description": "The arguments' size (their canonical JSON, UTF-8)."},
    result_bytes={"type": "integer", "description": "The answer's size as the caller got it (UTF-8)."},
    trace_id=_NULL_STR,
    replica=_NULL_STR,
    cancelled_by={
        "type": ["string", "null"],
        "description": "Who cancelled it by its call id: role and tenant.",
    },
)
_BUCKET = _obj(
    "10 seconds of one server's calls.",
    start=_NUM,
    count=_INT,
    p50_ms=_NULL_NUM,
    p99_ms=_NULL_NUM,
)

INSPECTION_SCHEMAS: dict[str, Any] = {
    "CallList": _obj("The calls in flight, oldest first.", calls={"type": "array", "items": _CALL}),
    "CallCancelled": _obj("The call is being cancelled.", call_id=STR, status={"const": "cancelling"}),
    "AuditPage": _obj(
        "One page of audit rows, newest first.",
        rows={"type": "array", "items": _ROW},
        cursor={
            "type": ["string", "null"],
            "description": "Pass as cursor= for the next page; null: no more.",
        },
    ),
    "LatencySeries": _obj(
        "One server's latency, oldest bucket first.",
        server=STR,
        bucket_s=_INT,
        buckets={"type": "array", "items": _BUCKET},
    ),
}
