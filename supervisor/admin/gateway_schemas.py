"""The JSON Schema of ``GET /v1/gateway/sessions``, beside ``schemas.py``'s in the
OpenAPI document: a handshake-era session (``era: "handshake"``) or a per-request-era
tenant state (``era: "2026-07-28"``: that era has no session, so what a tenant's
requests share is listed instead)."""

from __future__ import annotations

from typing import Any

from supervisor.admin.schemas import STR, ref

_INT, _NUM = {"type": "integer"}, {"type": "number"}
_NULL_STR, _CLIENT = {"type": ["string", "null"]}, {"type": ["object", "null"]}
_NAMES = {"type": "array", "items": STR}


def _obj(description: str, required: tuple[str, ...], **properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "required": list(required),
        "properties": properties,
    }


_COMMON = (
    "session_id",
    "era",
    "protocol_version",
    "client",
    "tenant",
    "age_s",
    "turns",
    "in_flight",
    "servers",
)

GATEWAY_SCHEMAS: dict[str, Any] = {
    "GatewaySessionList": _obj(
        "Handshake-era sessions first, then per-request-era tenant states.",
        ("sessions",),
        sessions={
            "type": "array",
            "items": {"oneOf": [ref("GatewaySession"), ref("GatewayTenantState")]},
        },
    ),
    "GatewaySession": _obj(
        "An open /mcp session of the handshake era.",
        _COMMON,
        session_id={**STR, "description": "Its Mcp-Session-Id."},
        era={"const": "handshake"},
        protocol_version=_NULL_STR,
        client=_CLIENT,
        tenant=STR,
        age_s=_NUM,
        turns=_INT,
        in_flight=_INT,
        servers=_NAMES,
    ),
    "GatewayTenantState": _obj(
        "What a tenant's (or signed-in person's) 2026-07-28 requests share, held until "
        "gateway.session_idle_s unused.",
        (*_COMMON, "idle_s", "parked", "activated", "approvals"),
        session_id={
            **STR,
            "description": "The supervisor session behind it (as calls and audit rows name it).",
        },
        era={"const": "2026-07-28"},
        protocol_version={**_NULL_STR, "description": "Its latest request's."},
        client={**_CLIENT, "description": "The clientInfo of its latest request's _meta."},
        tenant=STR,
        person={**STR, "description": "The signed-in person, when not the tenant's name."},
        age_s=_NUM,
        idle_s={**_NUM, "description": "Seconds since last used (0 while in use)."},
        turns=_INT,
        in_flight={**_INT, "description": "Requests being answered now."},
        parked={**_INT, "description": "Calls held: running, or waiting for an input-required retry."},
        activated={**_NAMES, "description": "Tools activated by tool_search or a call by name."},
        approvals={
            "type": "array",
            "description": 'The "for the session" answers kept.',
            "items": {
                "type": "object",
                "required": ["permission", "decision"],
                "properties": {"permission": STR, "decision": {"enum": ["allow", "deny"]}},
            },
        },
        servers=_NAMES,
    ),
}
