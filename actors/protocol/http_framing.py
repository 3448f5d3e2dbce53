"""The framings of MCP over HTTP: a JSON body, and SSE ``message`` events.

Streamable HTTP POSTs each message we send as a JSON body. The server answers a
request with a JSON body or with an SSE stream (``text/event-stream``, parsed by
``sse.py``) whose ``message`` events each carry one JSON-RPC message; legacy
HTTP+SSE sends every server message as such an event on its GET stream. A body or an
event may hold a JSON-RPC batch. Each is decoded once, here, into the messages of
``messages.py``; one that does not decode is a ProtocolError naming what it was.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from actors.protocol.jsonrpc import decode_json, encode_json
from actors.protocol.messages import META_PROTOCOL_VERSION, ErrorResponse, Message, Request, Response
from actors.protocol.sse import ServerSentEvent

USER_AGENT = "trio-mcp-supervisor"  # how we name ourselves to remote servers and OAuth servers


def encode_body(message: Message) -> bytes:
    """A message as the body of a POST; Unencodable if JSON cannot carry it."""
    return encode_json(message)


def decode_body(body: bytes) -> list[Message]:
    """The message(s) of a JSON response body."""
    return decode_json(body, "body")


def decode_event(event: ServerSentEvent) -> list[Message]:
    """The message(s) of an SSE event: none for other event types and for events
    without data (a stream's priming event carries only an id)."""
    if event.event != "message" or not event.data.strip():
        return []
    return decode_json(event.data, "event")


def what(message: Message) -> str:
    """How error texts name a message we send: ``tools/call``, ``a response``."""
    return "a response" if isinstance(message, Response | ErrorResponse) else message.method


def is_answer(message: Message, request: Request) -> bool:
    """Is this message the response (or error) to ``request``? (Ids match in type too:
    1 and "1" are different requests.)"""
    if not isinstance(message, Response | ErrorResponse):
        return False
    found = message.id
    return type(found) is type(request.id) and found == request.id


# Methods whose request names a tool, prompt or resource, and the params key that
# holds the name the ``Mcp-Name`` header repeats.
NAME_BEARING_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_HEADER_SAFE = re.compile(r"[\x20-\x7e]*\Z")
_B64_SENTINEL = re.compile(r"=\?base64\?.*\?=\Z")


def header_value(value: str) -> str:
    """A value as a header carries it: printable ASCII as it is, anything else (or
    what would read as the sentinel) as ``=?base64?…?=`` of its UTF-8 bytes."""
    if _HEADER_SAFE.match(value) and value == value.strip() and not _B64_SENTINEL.match(value):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


def request_headers(message: Message) -> dict[str, str]:
    """The per-request era's headers of a POSTed request: ``MCP-Protocol-Version``
    (from its ``_meta``), ``Mcp-Method`` and ``Mcp-Name``. None for a request of the
    handshake era (no protocol version in its ``_meta``). A traced request's trace
    context (``traceparent`` …) in either era."""
    if not isinstance(message, Request) or not isinstance(message.params, dict):
        return {}
    meta = message.params.get("_meta")
    if isinstance(meta, dict) and "traceparent" in meta:  # a traced request, in either era
        return {**trace_headers(meta), **_era_headers(message, meta)}
    return _era_headers(message, meta)


TRACE_META_KEYS = ("traceparent", "tracestate", "baggage")
"""The trace context a traced request carries, unprefixed, in its ``params._meta``
(``actors/tracing.py``), and over HTTP also as headers of the same names."""


def trace_headers(meta: Mapping[str, Any]) -> dict[str, str]:
    """The trace context of a request's ``_meta`` as HTTP headers (empty without it)."""
    return {key: value for key in TRACE_META_KEYS if isinstance(value := meta.get(key), str)}


def _era_headers(message: Request, meta: Any) -> dict[str, str]:
    assert isinstance(message.params, dict)
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    if not isinstance(version, str) or not _HEADER_SAFE.match(version):
        return {}
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": header_value(message.method)}
    key = NAME_BEARING_METHODS.get(message.method)
    name = message.params.get(key) if key is not None else None
    if isinstance(name, str):
        headers["Mcp-Name"] = header_value(name)
    return headers
