"""``/mcp``'s check of a new-era ``tools/call``'s ``Mcp-Param-*`` headers (SEP-2243)
against the arguments of the tool's ``x-mcp-header`` parameters, as the client saw the
tool listed: a mismatch, a missing header or bad Base64 is refused with 400 and -32020,
naming the header (``actors/protocol/param_headers.py`` has the rules)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from actors.protocol.jsonrpc import to_wire
from actors.protocol.param_headers import HEADER_PREFIX, annotation_problem, designations, header_mismatch
from actors.protocol.server_session import error_response
from supervisor.gateway.core import GatewayCore
from supervisor.gateway.http_rules import HEADER_MISMATCH
from supervisor.gateway.results import JsonRpcError


def param_headers_of(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers of a request (its name-value pairs), names lowercased."""
    prefix = HEADER_PREFIX.lower()
    return {name.lower(): value for name, value in headers if name.lower().startswith(prefix)}


async def param_header_refusal(
    core: GatewayCore, message: Mapping[str, Any], received: Mapping[str, str]
) -> dict[str, Any] | None:
    """The -32020 error response when a ``tools/call``'s ``Mcp-Param-*`` headers do not
    repeat its arguments, else None (other methods, and unknown tools: the call says)."""
    params = message.get("params")
    if message.get("method") != "tools/call" or not isinstance(params, Mapping):
        return None
    name = params.get("name")
    if not isinstance(name, str):
        return None
    turn = await core.latest_turn()
    entry = turn.catalog.tools.get(core.tool_id(turn, name))
    if entry is None:
        return None
    schema = entry.schemas()["input_schema"]
    designated = designations(schema) if annotation_problem(schema) is None else {}
    problem = header_mismatch(designated, params.get("arguments"), received)
    if problem is None:
        return None
    refusal = JsonRpcError(HEADER_MISMATCH, f"header mismatch: {problem}")
    return to_wire(error_response(message.get("id"), refusal))
