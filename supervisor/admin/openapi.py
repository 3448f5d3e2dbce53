"""The admin API's one route table, and the OpenAPI 3.1 document built from it.

``app.py`` registers exactly these routes (``operation`` names the handler) and
serves ``document()`` at ``/v1/openapi.json``, so what is documented is what is
served, by construction; a test checks both directions against the running app.
Each route names the ``roles.Action`` it needs; the guard checks it, and the
document lists the roles that may call each operation (``x-roles``). The bodies'
schemas (``schemas.py``) are JSON Schema 2020-12 (OpenAPI 3.1's dialect) and are also
used by the tests to validate real responses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from supervisor.admin.bridge_routes import BRIDGE_ROUTES, BRIDGE_SCHEMAS
from supervisor.admin.schemas import SCHEMAS, STR, ref
from supervisor.web.roles import Action, allowed_roles
from supervisor.web.routes import JSON, METRICS, SSE, Route

_READ, _USE, _CONTROL = Action.READ_STATE, Action.USE_SESSIONS, Action.CONTROL_SERVERS
OPTIONAL_BODIES = frozenset({"NewSession"})  # and a DELETE's body (its query may say the same)

ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/v1/health",
        "health",
        "Liveness, server count and catalog epoch; 'degraded' while audit rows wait in "
        "memory because the disk refuses them (how many: mcp_supervisor_audit_rows_pending "
        "and mcp_supervisor_audit_rows_dropped_total in /metrics).",
        response="Health",
        action=Action.PUBLIC,
    ),
    Route(
        "GET",
        "/metrics",
        "metrics",
        "Prometheus metrics (text exposition format 0.0.4); counters across every tenant.",
        media=METRICS,
        action=Action.READ_METRICS,
    ),
    Route("GET", "/v1/openapi.json", "openapi", "This document.", action=_READ),
    Route(
        "GET",
        "/v1/events",
        "events",
        "Server-sent events: hello first, then state and epoch changes, and call, approval and "
        "resource_updated events (a tenant's own; an operator's stream carries every tenant's); "
        "a comment heartbeat every 15 s.",
        media=SSE,
        action=_READ,
    ),
    Route(
        "GET",
        "/v1/servers",
        "list_servers",
        "Every configured server and its state.",
        response="ServerList",
        action=_READ,
    ),
    Route(
        "GET",
        "/v1/servers/{name}",
        "get_server",
        "One server: state, since, attempt, next retry, last error, recent transitions, stderr tail.",
        response="ServerDetail",
        action=_READ,
    ),
    Route(
        "POST",
        "/v1/servers/{name}/restart",
        "restart_server",
        "Restart a shared server.",
        status=202,
        response="Command",
        action=_CONTROL,
    ),
    Route(
        "POST",
        "/v1/servers/{name}/enable",
        "enable_server",
        "Enable a disabled shared server.",
        status=202,
        response="Command",
        action=_CONTROL,
    ),
    Route(
        "POST",
        "/v1/servers/{name}/disable",
        "disable_server",
        "Stop a shared server and keep it down.",
        status=202,
        response="Command",
        action=_CONTROL,
    ),
    Route(
        "POST",
        "/v1/config/reload",
        "reload_config",
        "Read the config file again and apply the difference without a restart: servers whose "
        "launch keys changed restart, removed ones stop, new ones start, the others keep running "
        "and take their new settings.",
        response="Reload",
        errors=(
            (
                "409",
                "restart_needed: admin.bind or state_dir changed (error.key names it), or "
                "no_config_file: the service was started without one. Nothing changed.",
            ),
            (
                "422",
                "config_error: the file is malformed (the message is the config error line). "
                "Nothing changed.",
            ),
        ),
        action=_CONTROL,
    ),
    Route(
        "GET",
        "/v1/tools",
        "list_tools",
        "Every tool of the current catalog; untrusted servers' descriptions are cut to "
        "their listing length, except with ?full=1 (operator role only).",
        response="ToolList",
        action=_READ,
    ),
    Route(
        "GET",
        "/v1/sessions",
        "list_sessions",
        "Open sessions: a tenant's own; an operator sees every tenant's.",
        response="SessionList",
        action=_USE,
    ),
    Route(
        "POST",
        "/v1/sessions",
        "create_session",
        "Open a session (the body is optional).",
        status=201,
        request="NewSession",
        response="Session",
        action=_USE,
    ),
    Route(
        "DELETE",
        "/v1/sessions/{sid}",
        "delete_session",
        "Close a session and its private servers (an operator may close any tenant's).",
        status=204,
        action=_USE,
    ),
    Route(
        "POST",
        "/v1/sessions/{sid}/turns",
        "begin_turn",
        "Begin a turn: freeze the catalog epoch and list the tools the model is shown.",
        status=201,
        response="Turn",
        action=_USE,
    ),
    Route(
        "POST",
        "/v1/sessions/{sid}/turns/{tid}/calls",
        "call_tool",
        "Call a tool of the turn; the answer is the result envelope, also for an unknown "
        "tool, invalid arguments or a denial (every call attempt leaves one audit row). With "
        "'Accept: text/event-stream': request_received first, progress events, result, done last.",
        request="CallRequest",
        response="Envelope",
        streams=True,
        action=_USE,
    ),
    Route(
        "POST",
        "/v1/sessions/{sid}/tool_search",
        "tool_search",
        "Search tools (in the session's latest turn, begun if there is none); matches are "
        "activated for the session.",
        request="SearchRequest",
        response="SearchResult",
        action=_USE,
    ),
    Route(
        "GET",
        "/v1/sessions/{sid}/turns/{tid}/resources",
        "list_resources",
        "The turn's resources and resource templates, frozen with it: each item as its server "
        "sent it, with the uri (uriTemplate) as shown (qualified as mcp-supervisor://<server>/<uri> "
        "when several servers publish it), its server and availability.",
        response="ResourceList",
        action=_READ,
    ),
    Route(
        "POST",
        "/v1/sessions/{sid}/turns/{tid}/resources/read",
        "read_resource",
        "Read a resource: a URI as shown, a qualified form, or the server's own URI with server; "
        "an unlisted URI goes to the one server whose template matches it. The answer is an "
        "envelope (unknown_resource says which server= or form to use); one audit row.",
        request="ReadRequest",
        response="Envelope",
        action=_USE,
    ),
    Route(
        "GET",
        "/v1/sessions/{sid}/turns/{tid}/prompts",
        "list_prompts",
        "The turn's prompts, frozen with it: each as its server sent it, named by its id "
        "<server>_<prompt>, with its server and availability.",
        response="PromptList",
        action=_READ,
    ),
    Route(
        "POST",
        "/v1/sessions/{sid}/turns/{tid}/prompts/get",
        "get_prompt",
        "Get a prompt of the turn by id, with its arguments; the answer is an envelope (the "
        "messages in structured); one audit row.",
        request="PromptRequest",
        response="Envelope",
        action=_USE,
    ),
    Route(
        "POST",
        "/v1/sessions/{sid}/turns/{tid}/completions",
        "complete",
        "Complete an argument of a prompt (ref/prompt with its id) or a resource template "
        "(ref/resource with the template as shown); the answer is an envelope (the "
        "completion in structured); one audit row.",
        request="CompletionRequest",
        response="Envelope",
        action=_USE,
    ),
    Route(
        "POST",
        "/v1/sessions/{sid}/subscriptions",
        "subscribe",
        "Subscribe the session to a resource (uri as for a read; server optional): its updates "
        "come on /v1/events as resource_updated events, to this tenant only. The answer is an "
        "envelope (unsupported: the server offers no subscriptions).",
        request="Subscription",
        response="Envelope",
        action=_USE,
    ),
    Route(
        "DELETE",
        "/v1/sessions/{sid}/subscriptions",
        "unsubscribe",
        "Leave a subscription: the same body as to subscribe, or ?uri=…&server=… (ok also when "
        "there was none).",
        request="Subscription",
        response="Envelope",
        query=("uri", "server"),
        action=_USE,
    ),
    Route(
        "POST",
        "/mcp",
        "mcp_post",
        "MCP Streamable HTTP: one JSON-RPC message. initialize without Mcp-Session-Id opens a "
        "session (its id comes back in Mcp-Session-Id); later messages carry it. A request's "
        "response is JSON, or (Accept: text/event-stream) an SSE stream when progress or a "
        "server request comes before it.",
        request="JsonRpcMessage",
        response="JsonRpcMessage",
        streams=True,
        bodiless=(("202", "A notification or a response was taken."),),
        errors=(("429", "The tenant holds gateway.max_sessions_per_tenant sessions already."),),
        error_schema="JsonRpcError",
        action=_USE,
    ),
    Route(
        "GET",
        "/mcp",
        "mcp_get",
        "The session's SSE stream of messages no request caused; with Last-Event-ID, the rest of "
        "any of its streams after that event.",
        media=SSE,
        errors=(("406", "Accept does not include text/event-stream."),),
        error_schema="JsonRpcError",
        action=_USE,
    ),
    Route(
        "DELETE",
        "/mcp",
        "mcp_delete",
        "End the MCP session: its scope: session servers stop.",
        status=204,
        error_schema="JsonRpcError",
        action=_USE,
    ),
    Route(
        "GET",
        "/v1/gateway/sessions",
        "list_gateway_sessions",
        "Open MCP sessions of /mcp (a tenant's own; an operator sees every tenant's): era, "
        "client, tenant, age, turns, calls in flight, servers.",
        response="GatewaySessionList",
        action=_USE,
    ),
    Route(
        "GET",
        "/v1/approvals",
        "list_approvals",
        "Approval requests waiting for an answer: a tenant's own; an operator sees every tenant's.",
        response="ApprovalList",
        action=_USE,
    ),
    Route(
        "POST",
        "/v1/approvals/{approval_id}",
        "answer_approval",
        "Answer a pending approval request (an operator may answer any tenant's).",
        status=204,
        request="ApprovalAnswer",
        action=_USE,
    ),
    Route(
        "POST",
        "/v1/requests/{rid}/cancel",
        "cancel_request",
        "Cancel a call in flight by the request id this tenant gave it: the server is told "
        "and the caller gets 'cancelled'.",
        status=202,
        response="Cancelled",
        action=_USE,
    ),
    *BRIDGE_ROUTES,
)

__all__ = ["JSON", "METRICS", "ROUTES", "SSE", "Route", "document"]

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
    "every tenant's view (all approvals, sessions and call events), besides its own sessions. "
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
        schema = ref(route.error_schema)
        responses[status] = {"description": description, "content": {JSON: {"schema": schema}}}
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
            "schemas": {**SCHEMAS, **BRIDGE_SCHEMAS},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
