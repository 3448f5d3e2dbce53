"""A server's log messages (``notifications/message``) in our structured log.

Each record goes to the ``actors.server`` logger under the server's name, at the
Python level its RFC 5424 level maps to. The server is untrusted input: its ``data``
(any JSON) is rendered as text, redacted (the server's secrets and credential-shaped
text) and cut to ``MAX_DATA_CHARS``, so a chatty or hostile server cannot fill the
log with one message or leak a token through it. How much it sends at all is its
``log_level`` (``logging/setLevel``, sent by the connection actor).

A connection may also be given a ``LogSink``: each message, as logged (redacted and
bounded), is handed to it as a ``ServerLogged``, so a gateway can pass it on to the
clients that asked for it, without this package knowing who they are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
import orjson

from actors.log_events import get_logger
from actors.protocol.notifications import LogMessage
from actors.redaction import Redactor

log = get_logger("actors.server")

SERVER_LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
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
    server: str, message: LogMessage, redactor: Redactor, sink: LogSink | None = None
) -> None:
    """Log one of the server's messages under its name (unknown levels as warning),
    and hand it to ``sink``."""
    level = message.level.lower()
    fields: dict[str, object] = {"server": server, "level": level[:MAX_NAME_CHARS]}
    logger = None if message.logger is None else redactor.redact(message.logger[:MAX_NAME_CHARS])
    if logger is not None:
        fields["logger"] = logger
    data = fields["data"] = data_text(message.data, redactor)
    log.log(PYTHON_LEVELS.get(level, logging.WARNING), "server log", extra={"fields": fields})
    if sink is not None:
        known = level if level in PYTHON_LEVELS else "warning"
        sink(ServerLogged(server, known, data, logger))
