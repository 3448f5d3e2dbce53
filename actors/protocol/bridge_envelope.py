"""The WebSocket bridge's envelope (version 1), sans-I/O: frames to text and back.

Every frame is one JSON text object ``{"v": 1, "type": str, "id"?: str|int, "data"?: object}``.
``id`` is the sender's, echoed in the answer. We always send ``v``; a frame without it
is version 1 (the AIRI project's bridge, whose frames are otherwise this shape, sends
none), and any other value is refused. The types:

- ``mcp:session:open`` ``{serverName}`` → ``mcp:session:open:result`` ``{sessionId}``
  or ``{error: {code, message}}``;
- ``mcp:message`` ``{sessionId, jsonrpc}`` both ways, ``jsonrpc`` the raw JSON-RPC
  message, never rewritten (string and numeric ids alike);
- ``mcp:session:close`` ``{sessionId}`` either way (from the hub when the server's
  process ended, with ``reason``);
- ``mcp:error`` ``{code, message, sessionId?}``: an unknown session, a malformed or an
  oversized frame; the socket lives on;
- ``auth`` ``{token}``: the first frame of a client that cannot send headers (a browser);
- ``mcp:peer:register`` ``{servers: [{name, digest}]}`` → ``mcp:peer:register:result``
  ``{servers: [name], shadowed?: [name]}`` (names the hub exports itself, so it uses
  its own first) or ``{error: {code, message}}`` (``forbidden``: the token's role is
  not ``peer``; ``digest_conflict``).

``decode`` never raises: a frame that cannot be used is an :class:`EnvelopeError`
naming what is wrong, with the frame's ``id`` when it could be read, so the answer can
echo it. Both sides of the bridge (the hub and the ``websocket`` client transport)
use this one module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

import attrs
import orjson

from actors.protocol.json_depth import nested_too_deep, too_deep

VERSION: Final = 1

OPEN: Final = "mcp:session:open"
OPEN_RESULT: Final = "mcp:session:open:result"
MESSAGE: Final = "mcp:message"
CLOSE: Final = "mcp:session:close"
ERROR: Final = "mcp:error"
AUTH: Final = "auth"
PEER_REGISTER: Final = "mcp:peer:register"
PEER_REGISTER_RESULT: Final = "mcp:peer:register:result"
TYPES: Final = (OPEN, OPEN_RESULT, MESSAGE, CLOSE, ERROR, AUTH, PEER_REGISTER, PEER_REGISTER_RESULT)

# Error codes of this module (the hub adds its own: unknown_session, not_exported…).
MALFORMED: Final = "malformed_frame"
TOO_LARGE: Final = "frame_too_large"

FrameId: TypeAlias = str | int
DEFAULT_MAX_BYTES: Final = 4 * 1024 * 1024

# What the data of each type must hold: (key, accepted types, what to write).
_STR = (str,)
_NEEDS: Mapping[str, tuple[tuple[str, tuple[type, ...], str], ...]] = {
    OPEN: (("serverName", _STR, "a string"),),
    MESSAGE: (("sessionId", _STR, "a string"), ("jsonrpc", (dict, list), "a JSON-RPC object")),
    CLOSE: (("sessionId", _STR, "a string"),),
    AUTH: (("token", _STR, "a string"),),
    PEER_REGISTER: (("servers", (list,), "a list of {name, digest}"),),
    ERROR: (("code", _STR, "a string"), ("message", _STR, "a string")),
}


@attrs.frozen(slots=True)
class Frame:
    """One decoded frame; ``data`` is the JSON object as sent (``{}`` when absent)."""

    type: str
    data: Mapping[str, Any] = attrs.field(factory=dict)
    id: FrameId | None = None


@attrs.frozen(slots=True)
class EnvelopeError:
    """Why a frame could not be used; ``id`` is the frame's, when it could be read."""

    code: str
    message: str
    id: FrameId | None = None


def encode(frame: Frame) -> str:
    """The frame as one JSON text (``data`` left out when empty)."""
    obj: dict[str, Any] = {"v": VERSION, "type": frame.type}
    if frame.id is not None:
        obj["id"] = frame.id
    if frame.data:
        obj["data"] = frame.data
    return orjson.dumps(obj).decode()


def encode_message_json(session_id: str, jsonrpc: bytes) -> str:
    """An ``mcp:message`` whose ``jsonrpc`` is already JSON text (one line a server
    wrote, checked to parse): spliced in as is, so nothing in it is rewritten and it is
    not encoded twice."""
    return (
        b'{"v":1,"type":"mcp:message","data":{"sessionId":'
        + orjson.dumps(session_id)
        + b',"jsonrpc":'
        + jsonrpc
        + b"}}"
    ).decode()


def decode(text: str | bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> Frame | EnvelopeError:
    """One received frame, or what is wrong with it (pure; never raises)."""
    if isinstance(text, bytes | bytearray):
        size = len(text)
    elif len(text) * 4 <= max_bytes:  # UTF-8 takes at most 4 bytes a character
        size = 0
    else:
        size = len(text) if len(text) > max_bytes else len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return EnvelopeError(
            TOO_LARGE, f"the frame is {size} bytes, over the limit of {max_bytes}; send smaller messages"
        )
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if too_deep(exc):
            return EnvelopeError(MALFORMED, nested_too_deep("the frame"))
        return EnvelopeError(MALFORMED, f"the frame is not JSON ({exc.msg}); send one JSON object per frame")
    if not isinstance(obj, dict):
        return EnvelopeError(MALFORMED, 'the frame must be a JSON object like {"v": 1, "type": …}')
    raw_id = obj.get("id")
    frame_id = raw_id if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else None
    if "id" in obj and frame_id is None:
        return EnvelopeError(MALFORMED, "id must be a string or an integer")
    problem = _problem(obj)
    if problem is not None:
        return EnvelopeError(MALFORMED, problem, frame_id)
    return Frame(obj["type"], obj.get("data") or {}, frame_id)


def _problem(obj: Mapping[str, Any]) -> str | None:
    version = obj.get("v", VERSION)  # a frame without "v" is version 1 (other bridges send none)
    if version != VERSION or isinstance(version, bool):
        return f"unsupported envelope version {orjson.dumps(version).decode()}; this side speaks v: 1"
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        return "type must be a non-empty string such as 'mcp:session:open'"
    data = obj.get("data", {})
    if not isinstance(data, dict):
        return f"data of {kind} must be a JSON object"
    for key, types, what in _NEEDS.get(kind, ()):
        value = data.get(key)
        if not isinstance(value, types):
            return f"data.{key} of {kind} must be {what}"
    return None


# ------------------------------------------------------------------ constructors


def session_open(server_name: str, id: FrameId | None = None) -> Frame:
    return Frame(OPEN, {"serverName": server_name}, id)


def open_result(session_id: str, id: FrameId | None = None) -> Frame:
    return Frame(OPEN_RESULT, {"sessionId": session_id}, id)


def open_failed(code: str, message: str, id: FrameId | None = None) -> Frame:
    return Frame(OPEN_RESULT, {"error": {"code": code, "message": message}}, id)


def message(session_id: str, jsonrpc: Mapping[str, Any] | Sequence[Any]) -> Frame:
    return Frame(MESSAGE, {"sessionId": session_id, "jsonrpc": jsonrpc})


def session_close(
    session_id: str, reason: str | None = None, message: str | None = None, id: FrameId | None = None
) -> Frame:
    """A close; from the hub with ``reason`` (a code) and ``message`` (for people)."""
    data: dict[str, Any] = {"sessionId": session_id}
    if reason is not None:
        data["reason"] = reason
    if message is not None:
        data["message"] = message
    return Frame(CLOSE, data, id)


def error(code: str, message: str, session_id: str | None = None, id: FrameId | None = None) -> Frame:
    data: dict[str, Any] = {"code": code, "message": message}
    if session_id is not None:
        data["sessionId"] = session_id
    return Frame(ERROR, data, id)


def of_error(problem: EnvelopeError) -> Frame:
    """The ``mcp:error`` that answers a frame ``decode`` refused."""
    return error(problem.code, problem.message, id=problem.id)


def auth(token: str) -> Frame:
    return Frame(AUTH, {"token": token})


def peer_register(servers: Sequence[tuple[str, str]], id: FrameId | None = None) -> Frame:
    """``servers``: (name, digest of its launch config) pairs."""
    return Frame(PEER_REGISTER, {"servers": [{"name": n, "digest": d} for n, d in servers]}, id)


def peer_register_result(
    accepted: Sequence[str] = (),
    error: tuple[str, str] | None = None,
    id: FrameId | None = None,
    shadowed: Sequence[str] = (),
) -> Frame:
    """The servers taken (and, when there are any, those of them ``shadowed`` by the
    hub's own export of that name, which is used first), or ``error`` (code, message)
    when registration was refused."""
    if error is not None:
        return Frame(PEER_REGISTER_RESULT, {"error": {"code": error[0], "message": error[1]}}, id)
    data: dict[str, Any] = {"servers": list(accepted)}
    if shadowed:
        data["shadowed"] = list(shadowed)
    return Frame(PEER_REGISTER_RESULT, data, id)
