"""Errors of the protocol core.

    ProtocolError          the peer broke the protocol; the connection is failed, not the process
    ├── FramingError       a line that cannot be a message (too long, not JSON, not an object)
    └── VersionMismatch    the server answered a protocol version we do not speak

    Unencodable            a message of ours that JSON cannot carry (our caller's data, not the peer)

    JsonRpcError           a request we answer with a JSON-RPC error (``server_session.wire_error``)

Messages are meant for operators: they say what arrived and what was expected, and
quote at most a short, printable prefix of the offending bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.protocol.messages import Message


class ProtocolError(Exception):
    """The peer sent something that breaks MCP or JSON-RPC 2.0.

    ``decoded`` holds good messages read in the same chunk before the bad one.
    """

    decoded: Sequence[Any] = ()


class FramingError(ProtocolError):
    """A line on the wire is not a JSON-RPC message at all."""


class VersionMismatch(ProtocolError):
    """Version negotiation failed."""


class Unencodable(ValueError):
    """A message we were to send cannot be encoded as JSON (e.g. a dict with a key
    that is not a string, an integer past 64 bits); ``message`` is that message."""

    def __init__(self, message: Message, reason: str) -> None:
        super().__init__(reason)
        self.message = message


class JsonRpcError(Exception):
    """A request we answer with a JSON-RPC error instead of a result: its code, message
    and data as the client gets them (``server_session.wire_error`` turns it into one)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def snippet(data: bytes | str, limit: int = 60) -> str:
    """A short printable prefix of ``data`` for error texts (never the whole line)."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = text.replace("\n", "\\n").replace("\r", "\\r")
    return repr(text[:limit] + ("…" if len(text) > limit else ""))
