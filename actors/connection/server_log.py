"""A server's log messages (``notifications/message``) in our structured log.

Each record goes to the ``actors.server`` logger under the server's name, at the
Python level its RFC 5424 level maps to. The server is untrusted input: its ``data``
(any JSON) is rendered as text, redacted (the server's secrets and credential-shaped
text) and cut to ``MAX_DATA_CHARS``, so a chatty or hostile server cannot fill the
log with one message or leak a token through it. Only messages at or above the
server's ``log_level`` enter our log.

A connection may also be given a ``LogSink``: each message its clients want (redacted
and bounded as above), is handed to it as a ``ServerLogged``, so a gateway can pass it
on to the clients that asked for it, without this package knowing who they are; one
tied to a call goes to its caller's sink instead (``log_levels.py`` says which levels
are asked for, and what is tied to a call).

Nor can it flood the log, or the event loop every other server shares (``ServerLog``,
one per connection): a message that neither our log nor any client wants (a server
that ignores ``logging/setLevel``) is dropped before anything is formatted, and what
is left passes a token bucket, ``LOG_RATE_PER_S`` (100) a second with bursts of
``LOG_BURST`` (200); one line every ``DROPS_REPORT_S`` (10 s) counts what it held back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
import orjson
import trio

from actors.log_events import get_logger
from actors.protocol.messages import LOG_LEVELS
from actors.protocol.notifications import LogMessage
from actors.redaction import Redactor
from actors.token_bucket import TokenBucket

log = get_logger("actors.server")

SERVER_LOG_LEVELS: tuple[str, ...] = LOG_LEVELS
"""The RFC 5424 levels MCP names, least severe first (``log_level`` takes one)."""

PYTHON_LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

MAX_DATA_CHARS = 2000
MAX_NAME_CHARS = 100
LOG_RATE_PER_S = 100.0
LOG_BURST = 200
DROPS_REPORT_S = 10.0

_RANKS = {level: rank for rank, level in enumerate(SERVER_LOG_LEVELS)}
_UNKNOWN_RANK = _RANKS["warning"]


def admits(threshold: str, level: str) -> bool:
    """Whether a message at ``level`` passes ``threshold`` (RFC 5424 order; an unknown
    level counts as warning)."""
    return _rank(level) >= _RANKS[threshold]


def _rank(level: str) -> int:
    rank = _RANKS.get(level)
    return rank if rank is not None else _RANKS.get(level.lower(), _UNKNOWN_RANK)


def data_text(data: object, redactor: Redactor) -> str:
    """The message's data as one bounded, redacted line of text."""
    if isinstance(data, str):
        text = data
    else:
        try:
            text = orjson.dumps(data).decode()
        except TypeError:
            text = repr(data)
    # Redact before cutting, so a secret at the cut is still recognised whole.
    text = redactor.redact(text)
    if len(text) > MAX_DATA_CHARS:
        text = f"{text[:MAX_DATA_CHARS]}… ({len(text) - MAX_DATA_CHARS} more characters)"
    return text


@attrs.frozen(slots=True)
class ServerLogged:
    """One of a server's log messages as we logged it: redacted, bounded, and the
    level one of ``SERVER_LOG_LEVELS`` (an unknown one is ``warning``). ``owner``: the
    session of a private (``scope: session``) server, None for a shared one."""

    server: str
    level: str
    data: str
    logger: str | None = None
    owner: str | None = None


LogSink = Callable[[ServerLogged], None]
"""Takes each message a connection logs (it must not block: an actor's loop calls it)."""


def log_server_message(
    server: str, message: LogMessage, redactor: Redactor, sink: LogSink | None = None, *, ours: bool = True
) -> None:
    """Log one of the server's messages under its name (unknown levels as warning;
    ``ours``: False leaves our log out), and hand it to ``sink``."""
    level = message.level.lower()
    fields: dict[str, object] = {"server": server, "level": level[:MAX_NAME_CHARS]}
    logger = None if message.logger is None else redactor.redact(message.logger[:MAX_NAME_CHARS])
    if logger is not None:
        fields["logger"] = logger
    data = fields["data"] = data_text(message.data, redactor)
    if ours:
        log.log(PYTHON_LEVELS.get(level, logging.WARNING), "server log", extra={"fields": fields})
    if sink is not None:
        known = level if level in PYTHON_LEVELS else "warning"
        sink(ServerLogged(server, known, data, logger))


class ServerLog:
    """One connection's way from its server's log messages to ours: the level gate, the
    token bucket and the count of what it held back (see the module docstring). The
    count is told by a task in ``nursery`` (the connection's), within
    ``DROPS_REPORT_S`` of the first message held back, or when the connection ends."""

    __slots__ = ("_bucket", "_held_back", "_nursery", "_redactor", "_sink", "server")

    def __init__(
        self,
        server: str,
        redactor: Redactor,
        nursery: trio.Nursery,
        sink: LogSink | None = None,
        *,
        rate_per_s: float = LOG_RATE_PER_S,
        burst: int = LOG_BURST,
    ) -> None:
        self.server = server
        self._redactor = redactor
        self._nursery = nursery
        self._sink = sink
        self._bucket = TokenBucket(rate_per_s, burst)
        self._held_back = 0

    def take(
        self, message: LogMessage, own: str, clients: str | None = None, to: LogSink | None = None
    ) -> None:
        """Log ``message`` if it is at or above ``own`` (the server's ``log_level``), and
        hand it to ``to`` (the caller of the call it is tied to), else to the connection's
        sink, if it is at or above ``clients`` (None: no client wants any), when the
        bucket has room; what nobody wants is dropped, formatting nothing."""
        rank = _rank(message.level)
        ours = rank >= _RANKS[own]
        sink = (to or self._sink) if clients is not None and rank >= _RANKS[clients] else None
        if not ours and sink is None:
            return  # not asked for: not ours to count
        if self._bucket.take(trio.current_time()):
            log_server_message(self.server, message, self._redactor, sink, ours=ours)
            return
        self._held_back += 1
        if self._held_back == 1:
            self._nursery.start_soon(self._tell_later)

    async def _tell_later(self) -> None:
        try:
            await trio.sleep(DROPS_REPORT_S)
        finally:  # also when the connection ends first: the count is told all the same
            dropped, self._held_back = self._held_back, 0
            bucket = self._bucket
            limit = f"{bucket.rate_per_s:g}/s, bursts of {bucket.burst}"
            fields = {"server": self.server, "dropped": dropped, "limit": limit}
            log.warning("server log messages dropped", extra={"fields": fields})
