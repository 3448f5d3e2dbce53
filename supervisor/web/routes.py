"""The one route table of ``serve``: every operation of every app, its needs, its answers.

Every app asks it: the guard takes each route's action from here (``ROUTE_ACTIONS``),
the admin API registers its rows and serves the OpenAPI document built from all of
them (``admin/openapi.py``), and the mount table gives ``/mcp`` and ``/v1/bridge``
to the apps that ``Route.app`` names. So what is documented is what is served, and
checked, by construction; a test checks both directions against the running server.
"""

from __future__ import annotations

from supervisor.web.inspection_routes import INSPECTION_ROUTES
from supervisor.web.roles import Action
from supervisor.web.route import ADMIN, BRIDGE, GATEWAY, HTML, JSON, METRICS, SSE, Route

__all__ = ["ADMIN", "BRIDGE", "GATEWAY", "HTML", "JSON", "METRICS", "ROUTES", "SSE", "Route"]

_READ, _USE, _CONTROL = Action.READ_STATE, Action.USE_SESSIONS, Action.CONTROL_SERVERS

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
        "/v1/ready",
        "ready",
        "Readiness, for a load balancer's health check (not liveness: see /v1/health): 200 "
        "while serving with a fresh heartbeat (or one process); 503 with the reason while "
        "starting, draining (SIGTERM) or when the heartbeat could not be written within its TTL.",
        response="Ready",
        errors=(("503", "Not ready: ready false, and the reason (also as error.message)."),),
        action=Action.PUBLIC,
    ),
    Route(
        "GET",
        "/v1/oauth/callback",
        "oauth_callback",
        "A person's browser, back from signing in to a per_user server (its one-time state "
        "authenticates it; no bearer token): an HTML page says whether it worked.",
        media=HTML,
        errors=(("400", "The state is unknown, used already or expired: call the tool again."),),
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
        "/v1/replicas",
        "list_replicas",
        "The replicas sharing the store (store.url), from their heartbeat rows: id, run, address, "
        "state, alive, heartbeat age, sessions, calls in flight, config digest and whether it "
        "matches this one's, and which is this one; clustered false for one process.",
        response="ReplicaList",
        errors=(("503", "store_unavailable: the store cannot be read now."),),
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
        "Restart a shared server; a per_user one's connection of one person with ?person= "
        "(after their `auth login --user`: it reads their tokens anew).",
        query=("person",),
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
        "when several servers publish it), its server, availability and stale (true: from the "
        "store's copy of a lazy server that has not listed in this run).",
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
        "<server>_<prompt>, with its server, availability and stale.",
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
        app=GATEWAY,
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
        app=GATEWAY,
    ),
    Route(
        "DELETE",
        "/mcp",
        "mcp_delete",
        "End the MCP session: its scope: session servers stop.",
        status=204,
        error_schema="JsonRpcError",
        action=_USE,
        app=GATEWAY,
    ),
    Route(
        "GET",
        "/v1/gateway/sessions",
        "list_gateway_sessions",
        "Open MCP sessions of /mcp (a tenant's own; an operator sees every tenant's): era, "
        "client, tenant, age, turns, calls in flight, servers; then each 2026-07-28 tenant "
        "state (that era has no session): its activations, approvals for the session, parked calls.",
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
        "GET",
        "/v1/approvals/remembered",
        "list_remembered",
        "The \"always\" answers kept: a tenant's own; an operator sees every tenant's.",
        response="RememberedList",
        action=_USE,
    ),
    Route(
        "DELETE",
        "/v1/approvals/remembered",
        "forget_remembered",
        'Revoke an "always" answer (permission=mcp:<server>:<tool>; an operator may add tenant=).',
        status=204,
        query=("permission", "tenant"),
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
    Route(
        "GET",
        "/v1/bridge",
        "bridge",
        "The WebSocket bridge: raw MCP sessions of servers configured with bridge: true, one "
        "process per session (frames: mcp:session:open, mcp:message, mcp:session:close, "
        "mcp:error). The token may also come as the subprotocol mcp-supervisor.token.<token> "
        "or in a first auth frame; a plain HTTP GET is answered 426.",
        status=101,
        errors=(("426", "Not a WebSocket upgrade."),),
        action=Action.USE_SESSIONS,
        websocket=True,
        app=BRIDGE,
    ),
    Route(
        "GET",
        "/v1/bridge/sessions",
        "list_bridge_sessions",
        "Open bridge sessions (a tenant's own; an operator sees every tenant's): server, tenant, "
        "client, age, message counts, state.",
        response="BridgeSessionList",
        action=Action.USE_SESSIONS,
    ),
    Route(
        "GET",
        "/v1/bridge/peers",
        "list_bridge_peers",
        "Dial-out bridge peers registered with this hub: their servers (name, digest), sessions and age.",
        response="BridgePeerList",
        action=Action.READ_STATE,
    ),
    *(
        Route(
            "GET",
            f"/.well-known/oauth-protected-resource{suffix}",
            f"protected_resource{suffix.replace('/', '_')}",
            f"Protected-resource metadata (RFC 9728) of {what}: the resource (signin.resource) and "
            "the authorization servers whose tokens sign in, for MCP clients to find them from a 401.",
            response="ProtectedResource",
            errors=(("404", "Sign-in is off: the config has no signin section."),),
            action=Action.PUBLIC,
        )
        for suffix, what in (("", "this service"), ("/mcp", "/mcp"), ("/v1", "the admin API"))
    ),
    *INSPECTION_ROUTES,
)
