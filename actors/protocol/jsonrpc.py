"""JSON-RPC 2.0 messages to and from JSON: the part every framing shares.

A framing (newline-delimited JSON for stdio, ``ndjson.py``; a JSON body or SSE events
for HTTP, ``http_framing.py``) cuts the wire into JSON texts; this module turns one
JSON text into its message(s) and one message into its JSON text. A JSON-RPC batch
(a JSON array, allowed by protocol revision 2025-03-26) is unpacked into its messages.

orjson does the JSON work (about twice the standard library's speed here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from actors.protocol.errors import FramingError, ProtocolError, Unencodable, snippet
from actors.protocol.messages import (
    ErrorObject,
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
)


def decode_json(text: bytes | str, what: str = "line") -> list[Message]:
    """The message(s) of one JSON text, or a FramingError/ProtocolError that names
    ``what`` the text was (a line, a body, an event)."""
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise FramingError(f"{what} is not JSON ({exc.msg}): {snippet(text)}") from None
    if isinstance(obj, list):
        if not obj:
            raise ProtocolError("empty JSON-RPC batch")
        return [parse_message(item) for item in obj]
    return [parse_message(obj)]


def _check_id(value: Any) -> RequestId:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ProtocolError(f"JSON-RPC id must be a string or an integer, got {snippet(repr(value))}")
    return value


def _check_params(obj: Mapping[str, Any]) -> Any:
    params = obj.get("params")
    if params is not None and not isinstance(params, dict | list):
        raise ProtocolError(f"params of {obj.get('method')!r} must be an object or an array")
    return params


def _quote(obj: Any) -> str:
    try:
        return snippet(orjson.dumps(obj))
    except orjson.JSONEncodeError:
        # orjson reads 1024 levels of nesting but writes only 255: quoting must not
        # turn the peer's error into a TypeError that escapes the ProtocolError tree.
        return f"(a {type(obj).__name__} nested too deeply to quote)"


def parse_message(obj: Any) -> Message:
    """Classify one decoded JSON value as a JSON-RPC 2.0 message."""
    if not isinstance(obj, dict):
        raise FramingError(f"JSON-RPC message must be an object, got {type(obj).__name__}")
    if obj.get("jsonrpc") != "2.0":
        raise ProtocolError(f'message lacks "jsonrpc": "2.0": {_quote(obj)}')
    method = obj.get("method")
    if method is not None:
        if not isinstance(method, str):
            raise ProtocolError("JSON-RPC method must be a string")
        if "id" in obj:
            return Request(_check_id(obj["id"]), method, _check_params(obj))
        return Notification(method, _check_params(obj))
    if "id" not in obj:
        raise ProtocolError(f"message is neither request, notification nor response: {_quote(obj)}")
    if "result" in obj:
        result = obj["result"]
        if not isinstance(result, dict):
            raise ProtocolError(f"result of response {obj['id']!r} must be an object")
        return Response(_check_id(obj["id"]), result)
    error = obj.get("error")
    if (
        not isinstance(error, dict)
        or not isinstance(error.get("code"), int)
        or isinstance(error.get("code"), bool)  # an int to Python, not to JSON-RPC
        or not isinstance(error.get("message"), str)
    ):
        raise ProtocolError(f"response {obj.get('id')!r} has neither a result nor a valid error")
    rid = obj["id"]
    return ErrorResponse(
        None if rid is None else _check_id(rid),
        ErrorObject(error["code"], error["message"], error.get("data")),
    )


def to_wire(message: Message) -> dict[str, Any]:
    """A message as the JSON object the wire carries."""
    obj: dict[str, Any] = {"jsonrpc": "2.0"}
    if isinstance(message, Request):
        obj["id"] = message.id
        obj["method"] = message.method
        if message.params is not None:
            obj["params"] = message.params
    elif isinstance(message, Notification):
        obj["method"] = message.method
        if message.params is not None:
            obj["params"] = message.params
    elif isinstance(message, Response):
        obj["id"] = message.id
        obj["result"] = message.result
    else:
        obj["id"] = message.id
        err: dict[str, Any] = {"code": message.error.code, "message": message.error.message}
        if message.error.data is not None:
            err["data"] = message.error.data
        obj["error"] = err
    return obj


def encode_json(message: Message, option: int = 0) -> bytes:
    """One message as one compact JSON text; Unencodable if JSON cannot carry it
    (``option``: orjson options, e.g. ``orjson.OPT_APPEND_NEWLINE``)."""
    try:
        return orjson.dumps(to_wire(message), option=option)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise Unencodable(message, f"message cannot be encoded as JSON: {exc}") from None
