"""The JSON Schemas of the replicas' endpoints (``GET /v1/ready``, ``GET /v1/replicas``),
beside ``schemas.py``'s in the OpenAPI document."""

from __future__ import annotations

from typing import Any

from supervisor.admin.schemas import STR

_NUM, _INT, _BOOL = {"type": "number"}, {"type": "integer"}, {"type": "boolean"}
_REPLICA = (
    "id",
    "incarnation",
    "address",
    "state",
    "alive",
    "heartbeat_age_s",
    "started_at",
    "sessions",
    "in_flight",
    "config_digest",
    "config_matches",
    "self",
)

REPLICA_SCHEMAS: dict[str, Any] = {
    "Ready": {
        "type": "object",
        "required": ["ready"],
        "properties": {"ready": {"const": True}},
    },
    "ReplicaList": {
        "type": "object",
        "required": ["clustered", "replicas"],
        "properties": {
            "clustered": {"type": "boolean", "description": "false: no store.url, one process."},
            "replicas": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": list(_REPLICA),
                    "properties": {
                        "id": STR,
                        "incarnation": {"type": "string", "description": "This run of it: id:random."},
                        "address": {"type": ["string", "null"]},
                        "state": {"enum": ["serving", "draining"]},
                        "alive": {"type": "boolean", "description": "Its heartbeat is within its TTL."},
                        "heartbeat_age_s": _NUM,
                        "started_at": _NUM,
                        "sessions": _INT,
                        "in_flight": _INT,
                        "config_digest": STR,
                        "config_matches": {
                            "type": "boolean",
                            "description": "Its config digest is this replica's.",
                        },
                        "self": {"type": "boolean", "description": "The replica that answered."},
                    },
                },
            },
        },
    },
}
