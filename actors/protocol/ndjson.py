"""Newline-delimited JSON: the framing of stdio servers (one JSON-RPC message a line).

The line decoder keeps at most ``max_line_bytes`` of an unfinished line: a peer that
sends a longer line fails its connection with a FramingError instead of growing our
memory. Blank lines and ``\\r\\n`` endings are tolerated. JSON cannot hold a raw line
break inside a string, so an encoded message is always exactly one line.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from actors.protocol.errors import FramingError, ProtocolError
from actors.protocol.jsonrpc import decode_json, encode_json
from actors.protocol.messages import Message

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024


class LineDecoder:
    """Turns a byte stream into JSON-RPC messages, one per line."""

    __slots__ = ("_buffer", "_held", "_max_line_bytes", "_scan_from")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._buffer = bytearray()
        self._max_line_bytes = max_line_bytes
        self._scan_from = 0
        self._held: ProtocolError | None = None

    def feed(self, data: bytes | bytearray) -> list[Message]:
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
                    messages.extend(decode_json(line))
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

    def take(self, data: bytes | bytearray) -> list[Message]:
        """``feed`` for a reader that hands out messages before it fails: when a bad
        line follows good messages in ``data``, those are returned and the error is
        held for :meth:`raise_held`."""
        try:
            return self.feed(data)
        except ProtocolError as exc:
            if not exc.decoded:
                raise
            self._held = exc
            return list(exc.decoded)

    def raise_held(self) -> None:
        """Raise the error :meth:`take` held back, once; nothing if there is none."""
        held, self._held = self._held, None
        if held is not None:
            raise held

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


class LineSplitter:
    """Bytes to complete lines, left as they are (no JSON decoded): for a tunnel that
    passes a server's messages on without reading them. Blank lines are dropped, a
    ``\r`` before the newline too; a line over ``max_line_bytes`` is a FramingError."""

    __slots__ = ("_buffer", "max_line_bytes")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._buffer = bytearray()
        self.max_line_bytes = max_line_bytes

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        """The lines ``data`` completes (maybe none), without their newlines."""
        buffer = self._buffer
        buffer += data
        if b"\n" not in data:  # only the new bytes are scanned while a long line grows
            lines: list[bytes] = []
        else:
            *lines, rest = bytes(buffer).split(b"\n")
            self._buffer = buffer = bytearray(rest)
        if len(buffer) > self.max_line_bytes or any(len(line) > self.max_line_bytes for line in lines):
            self._buffer = bytearray()
            raise FramingError(f"a line longer than {self.max_line_bytes} bytes")
        return [line for line in (raw.rstrip(b"\r") for raw in lines) if line.strip()]


def encode_line(message: Message) -> bytes:
    """One message as one line of bytes, newline included; Unencodable if JSON
    cannot carry it."""
    return encode_json(message, orjson.OPT_APPEND_NEWLINE)


def encode_lines(messages: Sequence[Message]) -> bytes:
    """Messages as consecutive lines, for one write; Unencodable (naming the message)
    before anything is returned if one of them cannot be encoded."""
    if len(messages) == 1:  # most writes (a call, its answer): no list to build and join
        return encode_json(messages[0], orjson.OPT_APPEND_NEWLINE)
    return b"".join([encode_json(message, orjson.OPT_APPEND_NEWLINE) for message in messages])
