"""The framings of MCP over HTTP: a JSON body, and SSE ``message`` events.

Streamable HTTP POSTs each message we send as a JSON body. The server answers a
request with a JSON body or with an SSE stream (``text/event-stream``, parsed by
``sse.py``) whose ``message`` events each carry one JSON-RPC message; legacy
HTTP+SSE sends every server message as such an event on its GET stream. A body or an
event may hold a JSON-RPC batch. Each is decoded once, here, into the messages of
``messages.py``; one that does not decode is a ProtocolError naming what it was.
"""

from __future__ import annotations

from actors.protocol.jsonrpc import decode_json, encode_json
from actors.protocol.messages import Message
from actors.protocol.sse import ServerSentEvent


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
