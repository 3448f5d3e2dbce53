"""Structured logs: one line per event, secrets redacted on the way out.

Callers log ``log.info("state", extra={"fields": {"server": …, "state": …}})`` through
a logger from ``actors.log_events.get_logger`` (whose records carry their fields in
their message too, for hosts that format records themselves); the formatter renders
``<time> <level> <event> key=value …`` (or one JSON object per line with
``--log-format json``). Every line passes the redactor last, so a secret that
slipped into a reason or a stderr line is masked whatever its source.

With traces on, a line logged while a span is current (work done for a traced request,
in its task) ends with ``trace_id`` and ``span_id``, so a log search finds the trace
and a trace finds its lines; baggage is never logged. With traces off it costs one
attribute check.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable
from typing import Any

import orjson

from actors import log_events
from actors.log_events import event_name, log_value, record_fields
from actors.redaction import Redactor
from supervisor.runtime.tracing import TRACING
from supervisor.settings.model import Config

REPLICA: dict[str, str] = {}
"""``{"replica": id}`` while this process runs as a replica (``stamp_replica``): its
lines then say which one wrote them; a single process's lines stay as they were."""


def stamp_replica(replica: str | None) -> None:
    """Name ``replica`` in every line from now on (None: no more)."""
    REPLICA.clear()
    if replica is not None:
        REPLICA["replica"] = replica


class StructuredFormatter(logging.Formatter):
    """``key=value`` lines or JSON lines, redacted."""

    def __init__(self, redactor: Redactor, *, json_lines: bool = False) -> None:
        super().__init__()
        self._redactor = redactor
        self._json = json_lines

    def learn(self, secrets: Iterable[str]) -> None:
        """Mask ``secrets`` too, from the next line on (a config reload brought them)."""
        self._redactor = self._redactor.with_secrets(secrets)

    def format(self, record: logging.LogRecord) -> str:
        fields = record_fields(record)
        # Redact before quoting too: JSON escaping turns a secret holding '"' or '\\'
        # into text the final pass no longer recognises.
        message = self._redactor.redact(event_name(record))
        if record.exc_info:
            fields["error"] = self.formatException(record.exc_info).replace("\n", " | ")
        tracing = TRACING.active
        if tracing is not None and "trace_id" not in fields:  # a state line names its attempt's
            ids = tracing.current_ids()
            if ids is not None:
                fields["trace_id"], fields["span_id"] = ids
        if REPLICA and "replica" not in fields:
            fields.update(REPLICA)
        fields = {key: self._clean(value) for key, value in fields.items()}
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        stamp += f".{int(record.msecs):03d}Z"
        if self._json:
            line = orjson.dumps(
                {"time": stamp, "level": record.levelname.lower(), "event": message, **fields},
                default=str,
            ).decode()
        else:
            pairs = " ".join(f"{key}={log_value(value)}" for key, value in fields.items())
            # One line per event: a newline in the message must not forge a second line.
            message = message.replace("\r", "\\r").replace("\n", "\\n")
            line = f"{stamp} {record.levelname.lower():<7} {message} {pairs}".rstrip()
        return self._redactor.redact(line)

    def _clean(self, value: Any) -> Any:
        if value is None or isinstance(value, bool | int | float):
            return value
        return self._redactor.redact(str(value))


# HTTP client libraries: request URLs at INFO, raw headers (session ids, redirect URLs
# carrying authorization codes) at DEBUG. Kept at WARNING whatever our level.
NOISY_LOGGERS = ("httpx2", "httpcore2", "httpx", "httpcore")


def configure(secrets: Iterable[str] = (), *, level: int = logging.INFO, json_lines: bool = False) -> None:
    """Send structured, redacted log lines to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(StructuredFormatter(Redactor(secrets), json_lines=json_lines))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # The HTTP client logs every request with its full URL at INFO and response headers
    # (Mcp-Session-Id among them) at DEBUG: ours say what matters, without those.
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)


def learn_secrets(secrets: Iterable[str]) -> None:
    """Tell the formatters ``configure`` installed of more secrets (a config reload's),
    and the messages our loggers build for a host's own formatters."""
    secrets = tuple(secrets)
    log_events.learn_secrets(secrets)
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, StructuredFormatter):
            handler.formatter.learn(secrets)


def log_config_warnings(config: Config) -> None:
    """One ``config warning`` line each, in the supervisor's log (``check`` prints them;
    a running service logs them when it starts and when a reload applies the file)."""
    for warning in config.warnings:
        fields = {"file": warning.file, "path": warning.json_path, "problem": warning.problem}
        log_events.get_logger("supervisor").warning("config warning", extra={"fields": fields})
