"""The JSON Schemas of the admin API's bodies: ``components.schemas`` of its OpenAPI document.

JSON Schema 2020-12 (OpenAPI 3.1's dialect). ``openapi.py`` refers to them by name
from its route table; the tests validate real responses against them. The ``State``
enum is built from the connection states, so a new state cannot go undocumented.
"""

from __future__ import annotations

from typing import Any

from actors.connection.states import Availability, Phase, State
from actors.router.depth import MAX_ARGUMENT_DEPTH


def ref(name: str) -> dict[str, str]:
    """A reference to the schema ``name``."""
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: tuple[str, ...], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": properties}


STR = {"type": "string"}
_INT = {"type": "integer"}
_NUM = {"type": "number"}
_BOOL = {"type": "boolean"}
_NULL_STR = {"type": ["string", "null"]}
_NULL_NUM = {"type": ["number", "null"]}
_AVAILABILITY = {"enum": [a.value for a in Availability]}
# A tool's schemas exactly as its server sent them ($schema, $defs, $ref … untouched).
_INPUT_SCHEMA = {"type": "object", "description": "The tool's inputSchema, as its server sent it."}
_OUTPUT_SCHEMA = {
    "type": "object",
    "description": "The tool's outputSchema, as its server sent it; absent when it declares none.",
}

_REQUEST_ID = {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"}


def _surface_item(key: str, meaning: str) -> dict[str, Any]:
    """A listed resource, template or prompt: the server's item as sent, ``key`` as shown;
    ``stale``: from the store's copy of a server that has not listed in this run."""
    item = _obj(
        (key, "name", "server", "availability", "stale"),
        name=STR,
        server=STR,
        availability=_AVAILABILITY,
        stale=_BOOL,
    )
    item["properties"] = {key: {"type": "string", "description": meaning}, **item["properties"]}
    return item


SCHEMAS: dict[str, Any] = {
    "JsonRpcMessage": {
        **_obj(("jsonrpc",), jsonrpc={"const": "2.0"}),
        "description": "One JSON-RPC 2.0 message.",
    },
    "JsonRpcError": _obj(
        ("jsonrpc", "id", "error"),
        jsonrpc={"const": "2.0"},
        id={"type": ["string", "integer", "null"]},
        error=_obj(("code", "message"), code=_INT, message=STR),
    ),
    "Error": _obj(
        ("error",),
        error=_obj(
            ("code", "message"),
            code=STR,
            message=STR,
            roles={
                "type": "array",
                "items": ref("Role"),
                "description": "On a 403 for lack of a role: the roles that may.",
            },
        ),
    ),
    "Role": {"enum": ["operator", "tenant", "peer"]},
    "ProtectedResource": _obj(
        ("resource", "authorization_servers", "bearer_methods_supported"),
        resource=STR,
        authorization_servers={"type": "array", "items": STR},
        bearer_methods_supported={"type": "array", "items": {"const": "header"}},
    ),
    "Health": _obj(
        ("status", "servers", "epoch", "store"),
        status={"enum": ["ok", "degraded"]},
        servers=_INT,
        epoch=_INT,
        store={
            "type": "string",
            "description": "The store: 'sqlite' (in the state directory), or the PostgreSQL "
            "database as postgresql://host:port/db (never its credentials).",
        },
    ),
    "Transition": _obj(
        ("at", "state", "previous", "reason", "phase"),
        at=_NUM,
        state=ref("State"),
        previous=ref("State"),
        reason=_NULL_STR,
        phase=ref("Phase"),
    ),
    "State": {"type": ["string", "null"], "enum": [*(s.value for s in State), None]},
    "Phase": {"type": ["string", "null"], "enum": [*(p.value for p in Phase), None]},
    "Server": _obj(
        (
            "name",
            "type",
            "scope",
            "trusted",
            "enabled",
            "state",
            "since",
            "attempt",
            "next_retry_at",
            "retry_in_s",
            "last_error",
            "last_error_at",
            "last_error_age_s",
            "condition",
            "phase",
            "available",
            "reconnects",
            "tools",
            "stale",
        ),
        name=STR,
        type=STR,
        scope={"enum": ["shared", "session"]},
        trusted=_BOOL,
        enabled=_BOOL,
        state=ref("State"),
        since=_NULL_NUM,
        attempt=_INT,
        next_retry_at=_NULL_NUM,
        retry_in_s=_NULL_NUM,
        last_error=_NULL_STR,
        last_error_at=_NULL_NUM,
        last_error_age_s=_NULL_NUM,
        condition={"type": ["string", "null"], "enum": ["needs_auth", "crashed", None]},
        phase=ref("Phase"),
        available=_BOOL,
        reconnects=_INT,
        tools=_INT,
        stale=_BOOL,
    ),
    "ServerDetail": {
        "allOf": [
            ref("Server"),
            _obj(
                ("transitions", "stderr_tail", "in_flight", "problems"),
                transitions={"type": "array", "items": ref("Transition")},
                stderr_tail={"type": ["array", "null"], "items": STR},
                in_flight={"type": ["integer", "null"]},
                transport=_NULL_STR,
                problems={"type": "array", "items": STR},
                people={
                    "type": "object",
                    "additionalProperties": _INT,
                    "description": "A per_user server only: how many people's own connections are "
                    "in each state (needs_auth: their sign-in waits for them); counts, never names.",
                },
            ),
        ]
    },
    "ServerList": _obj(("servers",), servers={"type": "array", "items": ref("Server")}),
    "Command": _obj(("server", "command"), server=STR, command={"enum": ["restart", "enable", "disable"]}),
    "Reload": _obj(
        ("config", "restarted", "started", "stopped", "applied_live", "new_sessions"),
        config=_NULL_STR,
        restarted={"type": "array", "items": STR},
        started={"type": "array", "items": STR},
        stopped={"type": "array", "items": STR},
        applied_live=_obj(
            ("servers", "settings"),
            servers={"type": "object", "additionalProperties": {"type": "array", "items": STR}},
            settings={"type": "array", "items": STR},
        ),
        new_sessions={"type": "array", "items": STR},
    ),
    "Tool": _obj(
        ("id", "server", "name", "description", "input_schema", "available", "stale"),
        id=STR,
        server=STR,
        name=STR,
        description=STR,
        input_schema=_INPUT_SCHEMA,
        output_schema=_OUTPUT_SCHEMA,
        available=_BOOL,
        stale=_BOOL,
    ),
    "ToolList": _obj(("epoch", "tools"), epoch=_INT, tools={"type": "array", "items": ref("Tool")}),
    "NewSession": {
        "type": "object",
        "properties": {
            "host_tools": {"type": "integer", "minimum": 0},
            "pinned": {"type": "array", "items": STR},
        },
    },
    "Session": _obj(("session_id",), session_id=STR),
    "SessionInfo": _obj(
        ("session_id", "tenant", "host_tools", "pinned"),
        session_id=STR,
        tenant=STR,
        host_tools=_INT,
        pinned={"type": "array", "items": STR},
    ),
    "SessionList": _obj(("sessions",), sessions={"type": "array", "items": ref("SessionInfo")}),
    "Turn": _obj(
        ("turn_id", "epoch", "tools", "search_enabled"),
        turn_id=STR,
        epoch=_INT,
        tools={
            "type": "array",
            "items": _obj(
                ("id", "server", "input_schema", "available", "availability"),
                input_schema=_INPUT_SCHEMA,
                output_schema=_OUTPUT_SCHEMA,
                available=_BOOL,
                availability=_AVAILABILITY,
            ),
        },
        search_enabled=_BOOL,
    ),
    "CallRequest": {
        "type": "object",
        "required": ["tool"],
        "properties": {
            "tool": STR,
            "arguments": {
                "description": "The tool's arguments: an object nested at most "
                f"{MAX_ARGUMENT_DEPTH} levels deep. Anything else is answered with the call's "
                "own invalid_arguments envelope (and audit row), not a 400."
            },
            "request_id": _REQUEST_ID,
        },
    },
    "Envelope": {
        "oneOf": [
            _obj(
                ("ok", "tool", "text", "content", "structured", "truncated", "duration_ms"),
                ok={"const": True},
                tool=STR,
                text=STR,
                content={"type": "array", "items": {"type": "object"}},
                structured={},
                truncated=_BOOL,
                duration_ms=_INT,
            ),
            _obj(
                ("ok", "tool", "error"),
                ok={"const": False},
                tool=STR,
                error=_obj(
                    ("code", "message"),
                    code=STR,
                    message=STR,
                    retry_after_ms={
                        "type": "integer",
                        "description": "With code busy or rate_limited: when trying again is worth it.",
                    },
                ),
            ),
        ]
    },
    "SearchRequest": {"type": "object", "required": ["query"], "properties": {"query": STR}},
    "SearchResult": _obj(
        ("matches", "turn_id"),
        turn_id=STR,
        matches={
            "type": "array",
            "items": _obj(
                ("id", "description", "input_schema", "server_state", "availability", "stale"),
                id=STR,
                description=STR,
                input_schema=_INPUT_SCHEMA,
                output_schema=_OUTPUT_SCHEMA,
                server_state=STR,
                availability=_AVAILABILITY,
                stale=_BOOL,
            ),
        },
    ),
    "Approval": _obj(
        ("id", "tool", "server", "permission", "arguments", "reason", "session", "tenant"),
        id=STR,
        tool=STR,
        server=STR,
        permission=STR,
        arguments={"type": "object"},
        reason=STR,
        session=STR,
        tenant=STR,
        person={
            "type": "string",
            "description": "Who the call is for, when not the tenant's name (docs/identity.md).",
        },
    ),
    "ApprovalList": _obj(("approvals",), approvals={"type": "array", "items": ref("Approval")}),
    "RememberedList": _obj(
        ("remembered",),
        remembered={
            "type": "array",
            "items": _obj(
                ("tenant", "permission", "decision"),
                tenant=STR,
                permission=STR,
                decision={"enum": ["allow", "deny"]},
            ),
        },
    ),
    "ApprovalAnswer": {
        "type": "object",
        "required": ["decision"],
        "properties": {
            "decision": {"enum": ["allow", "deny"]},
            "remember": {"enum": ["once", "session", "always"]},
        },
    },
    "Cancelled": _obj(("request_id", "status"), request_id=STR, status={"const": "cancelling"}),
    "ResourceList": _obj(
        ("turn_id", "epoch", "resources", "templates"),
        turn_id=STR,
        epoch=_INT,
        resources={
            "type": "array",
            "items": _surface_item("uri", "The URI as shown: itself, or mcp-supervisor://<server>/<uri>."),
        },
        templates={
            "type": "array",
            "items": _surface_item("uriTemplate", "The template as shown, by the same rule as a URI."),
        },
    ),
    "PromptList": _obj(
        ("turn_id", "epoch", "prompts"),
        turn_id=STR,
        epoch=_INT,
        prompts={"type": "array", "items": _surface_item("id", "The prompt id, <server>_<prompt>.")},
    ),
    "ReadRequest": {
        "type": "object",
        "required": ["uri"],
        "properties": {"uri": STR, "server": STR, "request_id": _REQUEST_ID},
    },
    "PromptRequest": {
        "type": "object",
        "required": ["id"],
        "properties": {
            "id": STR,
            "arguments": {"type": "object", "additionalProperties": STR},
            "request_id": _REQUEST_ID,
        },
    },
    "CompletionRequest": {
        "type": "object",
        "required": ["ref", "argument"],
        "properties": {
            "ref": {
                "oneOf": [
                    _obj(("type", "name"), type={"const": "ref/prompt"}, name=STR),
                    _obj(("type", "uri"), type={"const": "ref/resource"}, uri=STR),
                ],
                "description": "A prompt by its id, or a resource template as shown.",
            },
            "argument": _obj(("name", "value"), name=STR, value=STR),
            "context": {
                "type": "object",
                "properties": {"arguments": {"type": "object", "additionalProperties": STR}},
            },
        },
    },
    "Subscription": {"type": "object", "required": ["uri"], "properties": {"uri": STR, "server": STR}},
}


def _list_of(key: str, required: tuple[str, ...], **properties: Any) -> dict[str, Any]:
    item = {"type": "object", "required": list(required), "properties": properties}
    return {"type": "object", "required": [key], "properties": {key: {"type": "array", "items": item}}}


BRIDGE_SCHEMAS: dict[str, Any] = {  # the WebSocket bridge's listings
    "BridgeSessionList": _list_of(
        "sessions",
        ("session_id", "server", "tenant", "peer", "client", "age_s", "messages_in", "messages_out", "state"),
        session_id=STR,
        server=STR,
        tenant=STR,
        peer={"type": "string", "description": "Who runs the process: 'local' (this hub)."},
        client={"type": "string", "description": "The client's address (host:port)."},
        age_s={"type": "number"},
        messages_in={**_INT, "description": "Messages from the client to the server."},
        messages_out={**_INT, "description": "Messages from the server to the client."},
        pid={"type": ["integer", "null"]},
        state={"enum": ["starting", "open", "closing"]},
    ),
    "BridgePeerList": _list_of(
        "peers",
        ("peer", "servers", "sessions", "age_s"),
        peer=STR,
        servers={"type": "array", "items": _obj(("name", "digest"), name=STR, digest=STR)},
        sessions=_INT,
        age_s={"type": "number"},
    ),
}
