"""The OpenAPI 3.1 document of ``serve``, built from the one route table
(``supervisor/web/routes.py``) and served at ``/v1/openapi.json``.

Each route names the ``roles.Action`` it needs; the guard checks it, and the document
lists the roles that may call each operation (``x-roles``). The bodies' schemas
(``schemas.py``) are JSON Schema 2020-12 (OpenAPI 3.1's dialect) and are also used by
the tests to validate real responses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from supervisor.admin.gateway_schemas import GATEWAY_SCHEMAS
from supervisor.admin.inspection_schemas import INSPECTION_SCHEMAS
from supervisor.admin.replica_schemas import REPLICA_SCHEMAS
from supervisor.admin.schemas import BRIDGE_SCHEMAS, SCHEMAS, STR, ref
from supervisor.web.roles import allowed_roles
from supervisor.web.routes import HTML, JSON, ROUTES, SSE, Route

OPTIONAL_BODIES = frozenset({"NewSession"})  # and a DELETE's body (its query may say the same)

__all__ = ["document"]

_ERRORS = {
    "400": "Malformed JSON, a body field of the wrong type, or a request target that is not a path "
    "or an http(s) URL.",
    "401": "Missing or invalid bearer token.",
    "403": "Host, the authority of an absolute-form request target, or Origin is not loopback; or "
    "the token's role may not call this operation (error.roles lists the roles that may).",
    "404": "No such route, or no such object for this tenant.",
    "413": "The request body is too large.",
}

ROLES_DESCRIPTION = (
    "Each bearer token speaks for a tenant in a role. operator: server control, metrics, and "
    "every tenant's view (all approvals, sessions, calls in flight, audit rows and call events; "
    "it may cancel any tenant's call by its call id), besides its own sessions. "
    "tenant: its own sessions, turns, calls, approvals and requests, plus read-only server "
    "state. peer: registering servers as a bridge peer, nothing else. With no tokens "
    "configured, a loopback client is the operator of tenant 'default'. Each operation lists "
    "the roles that may call it in x-roles; another role gets 403 with error.roles. Objects of "
    "another tenant answer 404, never 403."
)


def _operation(route: Route) -> dict[str, Any]:
    operation: dict[str, Any] = {"operationId": route.operation, "summary": route.summary}
    parameters = [{"name": name, "in": "path", "required": True, "schema": STR} for name in route.parameters]
    parameters += [{"name": name, "in": "query", "required": False, "schema": STR} for name in route.query]
    if parameters:
        operation["parameters"] = parameters
    if route.request is not None:
        operation["requestBody"] = {
            "required": route.request not in OPTIONAL_BODIES and route.method != "DELETE",
            "content": {JSON: {"schema": ref(route.request)}},
        }
    success: dict[str, Any] = {"description": "Success."}
    if route.response is not None:
        success["content"] = {JSON: {"schema": ref(route.response)}}
    elif route.media != JSON:
        success["content"] = {route.media: {"schema": STR}}
    elif route.operation == "openapi":
        success["content"] = {JSON: {"schema": {"type": "object"}}}
    if route.streams:
        success.setdefault("content", {})[SSE] = {"schema": STR}
    if route.websocket:
        success["description"] = "Switching Protocols: the WebSocket is open."
        operation["x-websocket"] = True
    responses: dict[str, Any] = {str(route.status): success}
    responses.update({status: {"description": text} for status, text in route.bodiless})
    for status, description in (*_ERRORS.items(), *route.errors):
        if status == "401" and route.public:
            continue
        content = (
            {HTML: {"schema": STR}} if route.media == HTML else {JSON: {"schema": ref(route.error_schema)}}
        )
        responses[status] = {"description": description, "content": content}
    operation["responses"] = responses
    operation["security"] = [] if route.public else [{"bearer": []}]
    operation["x-roles"] = [role.value for role in allowed_roles(route.action)]
    if not route.public:
        operation["description"] = "Roles: " + ", ".join(operation["x-roles"]) + "."
    return operation


def document(routes: tuple[Route, ...] = ROUTES) -> Mapping[str, Any]:
    """The OpenAPI 3.1 document of ``routes``."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "mcp-supervisor admin API",
            "version": "1",
            "description": "Bearer token when tokens are configured; loopback only unless "
            "--allow-non-loopback. " + ROLES_DESCRIPTION,
        },
        "paths": paths,
        "components": {
            "schemas": {
                **SCHEMAS,
                **BRIDGE_SCHEMAS,
                **REPLICA_SCHEMAS,
                **INSPECTION_SCHEMAS,
                **GATEWAY_SCHEMAS,
            },
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
