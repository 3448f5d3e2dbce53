"""Our envelope as the MCP answer a gateway client gets (pure).

- A tool's own result passes through: its content items, ``structuredContent``, and
  its text cut at the server's ``max_output_bytes`` (the envelope did that).
- A tool's own error (``tool_error``) is ``isError: true`` with the tool's text.
- Our outcomes (``unavailable``, ``timeout``, ``cancelled``, ``denied``,
  ``invalid_arguments``, ``busy``, ``rate_limited``, …) are ``isError: true`` results
  too, so a model reads them: the envelope's message as text, its code (and
  ``retry_after_ms`` for ``busy`` and ``rate_limited``) under
  ``_meta["mcp-supervisor/error"]``.
- An unknown tool is a JSON-RPC error -32602 (invalid params), as the spec says.
- A ``needs_auth`` (the caller's person has not signed in to a ``per_user`` server) is
  -32042, URLElicitationRequiredError, with their authorization URL as a URL-mode
  elicitation in ``data.elicitations``.
- A server's JSON-RPC error is a ``server_error`` result, except the few in
  ``CLIENT_ERRORS``: errors about the client's request that only the client can act
  on, passed on as the JSON-RPC error the server sent (code, message, data).

A ``JsonRpcError`` raised here reaches the wire through the protocol core's server
session (``wire_error``), as every error answer of the gateway does.
"""

from __future__ import annotations

from typing import Any

# The JSON-RPC codes and error, re-exported: the gateway's modules take them from here.
from actors.protocol.errors import JsonRpcError as JsonRpcError
from actors.protocol.messages import INTERNAL_ERROR as INTERNAL_ERROR
from actors.protocol.messages import INVALID_PARAMS as INVALID_PARAMS
from actors.protocol.messages import INVALID_REQUEST as INVALID_REQUEST
from actors.protocol.messages import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from actors.protocol.messages import PARSE_ERROR as PARSE_ERROR
from actors.router.envelope import Envelope

ERROR_META = "mcp-supervisor/error"

RESOURCE_NOT_FOUND = -32002
MISSING_CAPABILITY = -32021
URL_ELICITATION_REQUIRED = -32042
"""URLElicitationRequiredError: the request needs the user to visit a URL first (MCP 2025-11-25)."""

CLIENT_ERRORS = frozenset({MISSING_CAPABILITY})
"""A server's JSON-RPC errors that reach the client as JSON-RPC errors. -32021 (missing
client capability): the client must declare the capability (and the new era answers it
with HTTP 400). The rest stay ``isError`` results the model reads: -32602 is invalid
arguments (a tool execution error since 2025-11-25), -32601/-32603 and the others say
the server failed, and -32020/-32000 are about the gateway's own link to the server."""


def sign_in_elicitation(envelope: Envelope) -> dict[str, Any]:
    """A ``needs_auth`` envelope as the URL-mode elicitation (MCP 2025-11-25) that sends
    its person to their own authorization URL."""
    error = envelope.error
    assert error is not None and error.authorization_url is not None
    return {"mode": "url", "elicitationId": error.elicitation_id or "", "url": error.authorization_url,
            "message": error.message}  # fmt: skip


def tool_result(envelope: Envelope, *, retry_after_ms: int | None = None) -> dict[str, Any]:
    """The ``CallToolResult`` of one call's envelope; raises ``JsonRpcError`` for an
    unknown tool."""
    if envelope.ok:
        result: dict[str, Any] = {"content": [dict(item) for item in envelope.content], "isError": False}
        if envelope.structured is not None:
            result["structuredContent"] = envelope.structured
        return result
    assert envelope.error is not None
    code, message = envelope.error.code, envelope.error.message
    if retry_after_ms is None:
        retry_after_ms = envelope.error.retry_after_ms
    if code == "unknown_tool":
        raise JsonRpcError(INVALID_PARAMS, message)
    if code == "needs_auth":  # the caller's person signs in first: the MCP way, to this client only
        raise JsonRpcError(
            URL_ELICITATION_REQUIRED, message, {"elicitations": [sign_in_elicitation(envelope)]}
        )
    rpc = envelope.error.rpc_error
    if code == "server_error" and rpc is not None and rpc.code in CLIENT_ERRORS:
        raise JsonRpcError(rpc.code, rpc.message, rpc.data)
    content = [dict(item) for item in envelope.content] or [{"type": "text", "text": message}]
    result = {"content": content, "isError": True}
    if code != "tool_error":
        detail: dict[str, Any] = {"code": code}
        if retry_after_ms is not None:
            detail["retry_after_ms"] = retry_after_ms
        result["_meta"] = {ERROR_META: detail}
    return result


def surface_error(envelope: Envelope) -> JsonRpcError:
    """The JSON-RPC error of a failed read, prompt get, completion or subscription:
    the envelope's message, its code in ``data``."""
    assert envelope.error is not None
    code, message = envelope.error.code, envelope.error.message
    if code == "unknown_resource":
        return JsonRpcError(RESOURCE_NOT_FOUND, message, {"code": code})
    if code in ("unknown_prompt", "invalid_arguments"):
        return JsonRpcError(INVALID_PARAMS, message, {"code": code})
    if code == "unsupported":
        return JsonRpcError(METHOD_NOT_FOUND, message, {"code": code})
    detail: dict[str, Any] = {"code": code}
    if envelope.error.retry_after_ms is not None:  # busy, rate_limited: when to try again
        detail["retry_after_ms"] = envelope.error.retry_after_ms
    return JsonRpcError(INTERNAL_ERROR, message, detail)
