"""Log records that carry their fields in their own message, whoever formats them.

Our code logs an event name with its fields beside it:
``log.warning("state", extra={"fields": {"server": "time", "state": "backoff", …}})``.
``supervisor.runtime.logs`` renders those as ``state server=time state=backoff …``, but a host
that embeds us formats records itself (Python's ``lastResort`` handler, ``basicConfig``,
its own formatter), and those print ``record.getMessage()`` alone: a bare ``state``.

So every logger of ours comes from ``get_logger``, which attaches ``FieldsInMessage``.
This filter (a library may filter its own loggers; it adds no handlers) rewrites the
record's message to ``<event> key=value …`` and keeps the bare event name in
``record.mcp_event`` for the structured formatter, which puts the fields in columns or
JSON keys itself.

Redaction: the message it builds passes a redactor that masks credential-shaped text
and every secret a supervisor in this process has told it of (``learn_secrets``:
``Supervisor.open`` and each reload do), since a host's formatter will not.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import orjson

from actors.redaction import Redactor

_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@,+")
EVENT_ATTR = "mcp_event"


def log_value(value: Any) -> str:
    """A value as one ``key=value`` word: plain text as is, anything else JSON-quoted."""
    text = str(value)
    if text and all(ch in _PLAIN for ch in text):
        return text
    return orjson.dumps(text).decode()


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a record carries: ``extra={"fields": …}``, and ``extra={"server": …}``."""
    fields: dict[str, Any] = dict(getattr(record, "fields", None) or {})
    if "server" not in fields and hasattr(record, "server"):
        fields["server"] = record.server
    return fields


def event_name(record: logging.LogRecord) -> str:
    """The record's message without its fields."""
    event = record.__dict__.get(EVENT_ATTR)
    return event if isinstance(event, str) else record.getMessage()


class FieldsInMessage(logging.Filter):
    """Append a record's fields to its message (once; the record passes every handler),
    redacted."""

    def __init__(self) -> None:
        super().__init__()
        self.redactor = Redactor(())

    def filter(self, record: logging.LogRecord) -> bool:
        if EVENT_ATTR in record.__dict__:
            return True
        event = record.getMessage()
        setattr(record, EVENT_ATTR, event)
        fields = record_fields(record)
        if fields:
            pairs = " ".join(f"{key}={log_value(value)}" for key, value in fields.items())
            record.msg, record.args = self.redactor.redact(f"{event} {pairs}"), None
        return True


_FILTER = FieldsInMessage()


def learn_secrets(secrets: Iterable[str]) -> None:
    """Mask ``secrets`` in every message built from fields from now on (they are kept
    for the life of the process: a secret may still turn up in a late line)."""
    _FILTER.redactor = _FILTER.redactor.with_secrets(secrets)  # duplicates are dropped


def redact(text: str) -> str:
    """``text`` masked as a log line is: credential-shaped values and every learned secret."""
    return _FILTER.redactor.redact(text)


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)``, its records carrying their fields in their message."""
    logger = logging.getLogger(name)
    logger.addFilter(_FILTER)  # idempotent: several modules share a logger name
    return logger
