"""Newline-delimited JSON-RPC framing and the (un)structuring of MCP payloads.

The line decoder keeps at most ``max_line_bytes`` of an unfinished line: a peer that
sends a longer line fails its connection with a FramingError instead of growing our
memory. Blank lines and ``\\r\\n`` endings are tolerated; a JSON-RPC batch (a JSON
array, allowed by protocol revision 2025-03-26) is unpacked into its messages.

orjson does the JSON work (about twice the standard library's speed here); cattrs,
with a private converter and camelCase renames, turns payload dicts into frozen classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cattrs
import orjson
from cattrs.gen import make_dict_structure_fn, override

from actors.protocol.errors import FramingError, ProtocolError, snippet
from actors.protocol.messages import (
    CallResult,
    ErrorObject,
    ErrorResponse,
    InitializeResult,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    Tool,
)

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024


class LineDecoder:
    """Turns a byte stream into JSON-RPC messages, one per line."""

    __slots__ = ("_buffer", "_max_line_bytes", "_scan_from")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._buffer = bytearray()
        self._max_line_bytes = max_line_bytes
        self._scan_from = 0

    def feed(self, data: bytes) -> list[Message]:
        """Add bytes; return every message completed by them (maybe none).

        On a bad line the decoder is emptied and the ProtocolError carries, in
        ``.decoded``, the good messages that came before it in the same data, so
        nothing the peer sent correctly is lost.
        """
        buffer = self._buffer
        buffer += data
        messages: list[Message] = []
        start = 0
        try:
            newline = buffer.find(b"\n", self._scan_from)
            while newline != -1:
                if newline - start > self._max_line_bytes:
                    self._fail_long_line()
                line = bytes(buffer[start:newline]).strip()
                if line:
                    messages.extend(decode_line(line))
                start = newline + 1
                newline = buffer.find(b"\n", start)
            if start:
                del buffer[:start]
            if len(buffer) > self._max_line_bytes:
                self._fail_long_line()
        except ProtocolError as exc:
            buffer.clear()
            self._scan_from = 0
            exc.decoded = messages
            raise
        self._scan_from = len(buffer)
        return messages

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unfinished line held in memory."""
        return len(self._buffer)

    def _fail_long_line(self) -> None:
        self._buffer.clear()
        self._scan_from = 0
        raise FramingError(
            f"line longer than {self._max_line_bytes} bytes without a newline; "
            "an MCP server must send one JSON-RPC message per line"
        )


def decode_line(line: bytes) -> list[Message]:
    """Parse one line into its message(s) or raise a FramingError/ProtocolError."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise FramingError(f"line is not JSON ({exc.msg}): {snippet(line)}") from None
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


def encode(message: Message) -> bytes:
    """One message as one line of bytes, newline included."""
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
    try:
        return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError as exc:
        raise ValueError(f"message cannot be encoded as JSON: {exc}") from None


# ---------------------------------------------------------------- payload converter

_converter = cattrs.Converter(forbid_extra_keys=False)
_converter.register_structure_hook(
    Tool,
    make_dict_structure_fn(
        Tool,
        _converter,
        input_schema=override(rename="inputSchema"),
        output_schema=override(rename="outputSchema"),
    ),
)
_converter.register_structure_hook(
    InitializeResult,
    make_dict_structure_fn(
        InitializeResult,
        _converter,
        protocol_version=override(rename="protocolVersion"),
        server_info=override(rename="serverInfo"),
    ),
)


def _brief(exc: Exception) -> str:
    if isinstance(exc, cattrs.ClassValidationError):
        notes: list[str] = []
        for sub in exc.exceptions:
            notes.extend(getattr(sub, "__notes__", []) or [str(sub)])
        return "; ".join(str(n) for n in notes) or str(exc)
    return str(exc)


def structure_tool(obj: Any) -> Tool:
    """A Tool from one ``tools/list`` entry, or ProtocolError saying what is wrong."""
    if not isinstance(obj, dict):
        raise ProtocolError(f"tool entry must be an object, got {type(obj).__name__}")
    if not isinstance(obj.get("name"), str) or not obj["name"]:
        raise ProtocolError("tool entry has no name")
    if "inputSchema" in obj and not isinstance(obj["inputSchema"], dict):
        raise ProtocolError(f"tool {obj['name']!r}: inputSchema must be an object")
    if obj.get("description") is None:
        obj = {**obj, "description": ""}
    try:
        return _converter.structure(obj, Tool)
    except (cattrs.BaseValidationError, TypeError, ValueError) as exc:
        raise ProtocolError(f"tool {obj['name']!r} is malformed: {_brief(exc)}") from None


def structure_initialize_result(obj: Mapping[str, Any]) -> InitializeResult:
    """An InitializeResult, or ProtocolError."""
    if not isinstance(obj.get("protocolVersion"), str):
        raise ProtocolError("initialize result has no protocolVersion")
    try:
        return _converter.structure(obj, InitializeResult)
    except (cattrs.BaseValidationError, TypeError, ValueError) as exc:
        raise ProtocolError(f"initialize result is malformed: {_brief(exc)}") from None


def structure_call_result(obj: Mapping[str, Any]) -> CallResult:
    """A CallResult, or ProtocolError (callers fail that one call, not the connection)."""
    content = obj.get("content", [])
    if not isinstance(content, list) or not all(isinstance(item, dict) for item in content):
        raise ProtocolError("tools/call result: content must be a list of objects")
    return CallResult(
        content=tuple(content),
        structured_content=obj.get("structuredContent"),
        is_error=obj.get("isError") is True,
    )


def unstructure(value: Any) -> Any:
    """Plain JSON-ready data from a payload class."""
    return _converter.unstructure(value)


def tool_to_wire(tool: Tool) -> dict[str, Any]:
    """A Tool back in its ``tools/list`` shape (for caches that must read it again)."""
    wire: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
    }
    if tool.title is not None:
        wire["title"] = tool.title
    if tool.annotations is not None:
        wire["annotations"] = tool.annotations
    if tool.output_schema is not None:
        wire["outputSchema"] = tool.output_schema
    return wire
