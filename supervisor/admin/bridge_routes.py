"""The WebSocket bridge's rows of the admin route table, and the schemas of its listings.

``openapi.py`` gathers them into ``ROUTES`` (so the guard and the document know them
like any other route). ``/v1/bridge`` is a WebSocket (``Route.websocket``): its
frames are the envelope of ``actors/protocol/bridge_envelope.py``, not JSON bodies.
"""

from __future__ import annotations

from typing import Any

from supervisor.web.roles import Action
from supervisor.web.routes import Route

_STR = {"type": "string"}
_INT = {"type": "integer"}


def _list_of(key: str, required: tuple[str, ...], **properties: Any) -> dict[str, Any]:
    item = {"type": "object", "required": list(required), "properties": properties}
    return {"type": "object", "required": [key], "properties": {key: {"type": "array", "items": item}}}


BRIDGE_SCHEMAS: dict[str, Any] = {
    "BridgeSessionList": _list_of(
        "sessions",
        ("session_id", "server", "tenant", "peer", "client", "age_s", "messages_in", "messages_out", "state"),
        session_id=_STR,
        server=_STR,
        tenant=_STR,
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
        ("peer", "tenant", "servers", "sessions", "age_s"),
        peer=_STR,
        tenant=_STR,
        servers={"type": "array", "items": _STR},
        sessions=_INT,
        age_s={"type": "number"},
    ),
}

BRIDGE_ROUTES: tuple[Route, ...] = (
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
)
