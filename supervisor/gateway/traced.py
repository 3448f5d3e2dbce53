"""The SERVER span of each request a gateway front receives (``/mcp`` in both eras,
``mcp-supervisor stdio``), named and attributed by OpenTelemetry's MCP conventions.

One place for both fronts and both eras: a request is wrapped where its answer is
made (``GatewayPeer.receive``, ``StatelessGateway.receive``), so the spans the answer
makes (our call span, the CLIENT span to the backend) are its children, and its
``error.type`` is read off the answer itself: the JSON-RPC error code, or for a
``tools/call`` result with ``isError`` the envelope code (``tool_error`` for the tool's
own). With traces off (``TRACING.active`` None) a request pays one attribute check.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from actors.protocol.http_framing import TRACE_META_KEYS
from supervisor.gateway.results import ERROR_META
from supervisor.runtime.tracing import TRACING
from supervisor.web.http import Headers

Answer = dict[str, Any] | None


@attrs.frozen(slots=True)
class Arrival:
    """How a request reached us: what its SERVER span says of the way in."""

    transport: str
    """``network.transport``: ``pipe`` (stdio) or ``tcp`` (HTTP)."""
    headers: Mapping[str, str] | None = None
    """The HTTP request's trace headers (``traceparent``…): the parent when the
    message's ``_meta`` names none."""
    client: tuple[str, int] | None = None
    """``client.address`` and ``client.port`` of an HTTP request."""


PIPE = Arrival("pipe")
HTTP = Arrival("tcp")


def http_arrival(headers: Headers, client: Any) -> Arrival | None:
    """The arrival of one HTTP request, or None while traces are off (nothing read)."""
    if TRACING.active is None:
        return None
    carried = {key: value for key in TRACE_META_KEYS if (value := headers.get(key)) is not None}
    peer = None
    if isinstance(client, list | tuple) and len(client) == 2:
        peer = (str(client[0]), int(client[1]))
    return Arrival("tcp", carried or None, peer)


def target_of(method: str, params: Any) -> str:
    """The span name's target: the tool's or prompt's name, the resource's URI."""
    if not isinstance(params, Mapping):
        return ""
    key = "uri" if method.startswith("resources/") else "name"
    value = params.get(key)
    return value if isinstance(value, str) else ""


def answer_error(answer: Answer) -> tuple[str | None, int | None]:
    """``error.type`` and the JSON-RPC error code (``rpc.response.status_code``) of an
    answer; (None, None) for a success."""
    if answer is None:
        return "cancelled", None  # the client cancelled it: no response goes out
    error = answer.get("error")
    if isinstance(error, Mapping):
        code = error.get("code")
        return str(code), code if isinstance(code, int) else None
    result = answer.get("result")
    if isinstance(result, Mapping) and result.get("isError") is True:
        meta = result.get("_meta")
        detail = meta.get(ERROR_META) if isinstance(meta, Mapping) else None
        code = detail.get("code") if isinstance(detail, Mapping) else None
        return (code if isinstance(code, str) else "tool_error"), None
    return None, None


async def traced(
    message: Mapping[str, Any],
    arrival: Arrival,
    answer: Callable[[], Awaitable[Answer]],
    *,
    session_id: str | None = None,
    protocol_version: str | None = None,
) -> Answer:
    """``answer()`` for one message; a request's inside its SERVER span."""
    tracing = TRACING.active
    method = message.get("method")
    if tracing is None or not isinstance(method, str) or "id" not in message:
        return await answer()
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    with tracing.server_span(
        method,
        target_of(method, params),
        meta,
        arrival.transport,
        headers=arrival.headers,
        request_id=message["id"],
        session_id=session_id,
        protocol_version=protocol_version,
        client=arrival.client,
    ) as trace:
        response = await answer()
        trace.ended(*answer_error(response))
        return response
