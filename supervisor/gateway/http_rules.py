"""The HTTP rules of ``/mcp`` that need only the request (pure).

Each refusal is an ``HttpRefusal``: an HTTP status and a JSON-RPC error (a
``JsonRpcError``, on the wire as the server session's ``wire_error`` makes it) that
says why (with the message's id when it has one), so a client or its user can fix
the request without reading our source:

- one JSON-RPC message per POST: a batch (array) is ``invalid_request`` (400); a body
  that is not JSON, or nests deeper than the parser reads, ``parse_error`` (400),
  saying which;
- a message over ``gateway.max_message_bytes`` gets its own error (413), and the
  session lives on;
- ``Mcp-Method`` / ``Mcp-Name``, when present, must repeat the body's method and the
  name (tool, prompt) or URI (resource) it names (400);
- after ``initialize``, ``MCP-Protocol-Version`` must be the negotiated version (400).
  A request without the header is taken, as the spec asks of servers (it then
  assumes a version; we keep the negotiated one), and so is one that says
  ``2025-03-26``, the version the spec tells a server to assume when a client does
  not say: it reads as "not said" (the 0.1.16 conformance suite sends it on every
  request of a session that negotiated 2025-11-25).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import orjson

from actors.protocol.http_framing import NAME_BEARING_METHODS, header_value
from actors.protocol.json_depth import nested_too_deep, too_deep
from actors.protocol.jsonrpc import to_wire
from actors.protocol.server_session import error_response
from supervisor.gateway.results import INVALID_REQUEST, PARSE_ERROR, JsonRpcError

MCP_PATH = "/mcp"
SESSION_HEADER = "Mcp-Session-Id"

Kind = Literal["request", "notification", "response"]
ASSUMED_VERSION = "2025-03-26"
"""What the spec tells a server to assume of a request that names no version."""


class HttpRefusal(JsonRpcError):
    """A POST, GET or DELETE refused: its HTTP status, and the JSON-RPC error the body
    carries (``code``, ``message``, ``data``, for the message ``request_id``)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: int = INVALID_REQUEST,
        request_id: Any = None,
        data: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(code, message, data)
        self.status = status
        self.request_id = request_id
        self.headers = dict(headers or {})  # sent after the body's own

    def body(self) -> dict[str, Any]:
        """A JSON-RPC error response (``id`` null when the message had none)."""
        return to_wire(error_response(self.request_id, self))


def too_large(size: int | None, bound: int) -> HttpRefusal:
    """The refusal of one message over ``gateway.max_message_bytes``."""
    what = f"the message is {size} bytes" if size is not None else "the message is larger"
    return HttpRefusal(
        413,
        f"{what}, over the gateway's bound of {bound} bytes (gateway.max_message_bytes); "
        "send a smaller message: the session is still open",
    )


def parse_message(raw: bytes) -> dict[str, Any]:
    """The one JSON-RPC message of a POST body."""
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        why = nested_too_deep("the body") if too_deep(exc) else f"the body is not JSON: {exc}"
        raise HttpRefusal(400, why, code=PARSE_ERROR) from None
    if isinstance(message, list):
        raise HttpRefusal(400, "batches are not accepted: send one JSON-RPC message per POST")
    if not isinstance(message, dict):
        raise HttpRefusal(400, "the body must be one JSON-RPC message (a JSON object)")
    request_id = message.get("id")
    if message.get("jsonrpc") != "2.0":
        raise HttpRefusal(400, 'the message must have "jsonrpc": "2.0"', request_id=request_id)
    if "id" in message and (request_id is None or isinstance(request_id, bool | float | dict | list)):
        raise HttpRefusal(400, "the message's id must be a string or an integer", request_id=None)
    kind_of(message)
    return message


def kind_of(message: Mapping[str, Any]) -> Kind:
    """What one message is; ``HttpRefusal`` when it is none of them."""
    method = message.get("method")
    if isinstance(method, str):
        return "request" if "id" in message else "notification"
    if "method" not in message and "id" in message and ("result" in message or "error" in message):
        return "response"
    raise HttpRefusal(
        400,
        "the message is not a JSON-RPC request, notification or response "
        "(a string method, or an id with a result or an error)",
        request_id=message.get("id"),
    )


def check_param_headers(message: Mapping[str, Any], mcp_method: str | None, mcp_name: str | None) -> None:
    """``Mcp-Method`` and ``Mcp-Name`` must repeat the body when they are sent."""
    method = message.get("method")
    request_id = message.get("id")
    if mcp_method is not None and (not isinstance(method, str) or mcp_method != header_value(method)):
        raise HttpRefusal(
            400,
            f"the Mcp-Method header ({mcp_method!r}) does not match the body's method ({method!r})",
            request_id=request_id,
        )
    if mcp_name is None:
        return
    key = NAME_BEARING_METHODS.get(method) if isinstance(method, str) else None
    params = message.get("params")
    name = params.get(key) if key is not None and isinstance(params, Mapping) else None
    if not isinstance(name, str) or mcp_name != header_value(name):
        raise HttpRefusal(
            400,
            f"the Mcp-Name header ({mcp_name!r}) does not match the body's "
            f"{'params.' + key if key else 'method, which names nothing'} ({name!r})",
            request_id=request_id,
        )


HEADER_MISMATCH = -32020
"""The 2026-07-28 era's error for headers that do not repeat the body (SEP-2243)."""


def require_param_headers(message: Mapping[str, Any], mcp_method: str | None, mcp_name: str | None) -> None:
    """A 2026-07-28 request must send ``Mcp-Method``, and ``Mcp-Name`` when its method
    names something (``check_param_headers`` has checked the values of those sent)."""
    method = message.get("method")
    if not isinstance(method, str) or "id" not in message:
        return
    missing = "Mcp-Method" if mcp_method is None else None
    if missing is None and mcp_name is None and method in NAME_BEARING_METHODS:
        missing = "Mcp-Name"
    if missing is not None:
        raise HttpRefusal(
            400,
            f"header mismatch: the {missing} header is missing; a 2026-07-28 request repeats its "
            "method in Mcp-Method (and what it names, e.g. params.name, in Mcp-Name)",
            code=HEADER_MISMATCH,
            request_id=message.get("id"),
        )


def check_version(header: str | None, negotiated: str | None, request_id: Any) -> None:
    """After initialize, ``MCP-Protocol-Version`` (when sent) must be the negotiated one."""
    if header in (None, ASSUMED_VERSION) or negotiated is None or header == negotiated:
        return
    raise HttpRefusal(
        400,
        f"MCP-Protocol-Version {header!r} does not match the version this session negotiated "
        f"({negotiated!r}); send that one, or initialize a new session",
        request_id=request_id,
    )
