"""A sans-I/O parser for Server-Sent Events (the WHATWG ``text/event-stream`` format).

Bytes go in with :meth:`SSEParser.feed`; the events they complete come out. No
sockets, no Trio: the callers own the I/O (the HTTP transports, and the CLI's admin
client through :func:`iter_events`), and tests can feed any chunking. It is the
project's one SSE parser.

The rules, from the HTML standard's "event stream interpretation":

- UTF-8; one leading byte-order mark is dropped. Lines end in CRLF, LF or CR (a CR at
  the end of a chunk may be the first half of a CRLF, so a LF that opens the next
  chunk is skipped).
- ``:comment`` lines are ignored. ``name: value`` sets a field (one space after the
  colon is dropped); a line without a colon is a field with an empty value.
- ``data`` lines accumulate, joined by ``\\n``; ``event`` names the type (default
  ``message``); ``id`` sets the last event id (ignored if it contains NUL) and sticks
  until the next ``id``; ``retry`` (digits only) sets the reconnection time.
- A blank line dispatches the event, unless no ``data`` field was seen; the last
  event id is updated either way (MCP servers prime streams with ``id`` + empty data).
- An event not ended by a blank line when the stream ends is dropped.

A line or an event's data longer than ``max_event_chars`` raises :class:`SSEError`
instead of growing memory without bound.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator

import attrs

DEFAULT_MAX_EVENT_CHARS = 8 * 1024 * 1024
_EOL = re.compile(r"\r\n|\r|\n")
_BOM = "\ufeff"


class SSEError(ValueError):
    """The stream broke the format's limits (an over-long line or event)."""


@attrs.frozen(slots=True)
class ServerSentEvent:
    """One dispatched event. ``id`` is the last event id in force when it was
    dispatched; ``retry`` is the reconnection time (ms) if this event's block set one."""

    data: str
    event: str = "message"
    id: str = ""
    retry: int | None = None


class SSEParser:
    """Turns an event stream's bytes into :class:`ServerSentEvent` objects.

    ``last_event_id`` and ``retry`` (milliseconds, or None if the server never sent
    one) hold what a reconnect needs, also after blocks that carried no data.
    """

    __slots__ = (
        "_block_retry",
        "_data",
        "_data_chars",
        "_decoder",
        "_event",
        "_id_buffer",
        "_max",
        "_pending",
        "_pending_chars",
        "_skip_lf",
        "_started",
        "last_event_id",
        "retry",
    )

    def __init__(
        self,
        max_event_chars: int = DEFAULT_MAX_EVENT_CHARS,
        *,
        last_event_id: str = "",
        retry: int | None = None,
    ) -> None:
        # last_event_id / retry: carried over from a stream this one resumes.
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._max = max_event_chars
        self._started = False
        self._skip_lf = False
        self._pending: list[str] = []
        self._pending_chars = 0
        self._data: list[str] = []
        self._data_chars = 0
        self._event = ""
        self._id_buffer = last_event_id
        self._block_retry: int | None = None
        self.last_event_id = last_event_id
        self.retry = retry

    def feed(self, data: bytes) -> list[ServerSentEvent]:
        """Add bytes; return the events they complete, in order (maybe none)."""
        return self._feed_text(self._decoder.decode(data))

    def close(self) -> list[ServerSentEvent]:
        """The stream ended: flush the decoder and forget the unfinished line. An event
        not ended by a blank line is dropped, as the standard says; returns what the
        flush completed (normally nothing)."""
        events = self._feed_text(self._decoder.decode(b"", final=True))
        self._pending.clear()
        self._pending_chars = 0
        return events

    def _feed_text(self, text: str) -> list[ServerSentEvent]:
        if not text:
            return []
        if not self._started:
            self._started = True
            if text.startswith(_BOM):
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        if not _EOL.search(text):
            # No line ends here: keep the pieces, join them once the line completes.
            self._pending.append(text)
            self._pending_chars += len(text)
            if self._pending_chars > self._max:
                raise SSEError(f"event stream line longer than {self._max} characters")
            return []
        if self._pending:
            self._pending.append(text)
            text = "".join(self._pending)
            self._pending.clear()
            self._pending_chars = 0
        events: list[ServerSentEvent] = []
        start = 0
        for match in _EOL.finditer(text):
            self._line(text[start : match.start()], events)
            start = match.end()
        rest = text[start:]
        if not rest and text.endswith("\r"):
            self._skip_lf = True  # the LF of a CRLF may open the next chunk
        if rest:
            if len(rest) > self._max:
                raise SSEError(f"event stream line longer than {self._max} characters")
            self._pending.append(rest)
            self._pending_chars = len(rest)
        return events

    def _line(self, line: str, events: list[ServerSentEvent]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line.startswith(":"):
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_chars += len(value) + 1
            if self._data_chars > self._max:
                raise SSEError(f"event data longer than {self._max} characters")
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id_buffer = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = self._block_retry = int(value)

    def _dispatch(self, events: list[ServerSentEvent]) -> None:
        self.last_event_id = self._id_buffer
        if self._data:
            events.append(
                ServerSentEvent(
                    data="\n".join(self._data),
                    event=self._event or "message",
                    id=self.last_event_id,
                    retry=self._block_retry,
                )
            )
        self._data.clear()
        self._data_chars = 0
        self._event = ""
        self._block_retry = None


def iter_events(
    chunks: Iterable[bytes], max_event_chars: int = DEFAULT_MAX_EVENT_CHARS
) -> Iterator[ServerSentEvent]:
    """The events of a whole stream given as chunks, in order. An event the end of the
    stream cuts short is dropped; an over-long one raises :class:`SSEError`."""
    parser = SSEParser(max_event_chars)
    for chunk in chunks:
        yield from parser.feed(chunk)
    yield from parser.close()
