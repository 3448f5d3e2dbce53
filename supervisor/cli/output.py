"""Where the client commands write (``commands.py``, ``surface.py``): tables and
payloads on stdout, messages on stderr, and the service's answers read defensively."""

from __future__ import annotations

import sys
from typing import Any

from supervisor.cli.client import ClientError, Reply
from supervisor.cli.text import one_line, printable

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def err(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def raw(reply_text: str) -> None:
    """``--json``: the service's document as served (one trailing newline)."""
    out(reply_text.strip())


def items(reply: Reply, key: str, what: str, url: str) -> list[dict[str, Any]]:
    """The list in ``reply`` (a bare list, or wrapped as ``{key: [...]}``)."""
    data = reply.data
    if isinstance(data, dict):
        data = data.get(key)
    if not isinstance(data, list):
        raise ClientError(f"the supervisor at {url} answered with something that is not a list of {what}")
    return [item for item in data if isinstance(item, dict)]


def warn_not_deleted(sid: str, exc: ClientError) -> None:
    err(f"mcp-supervisor: warning: could not delete session {sid}: {exc}")


def envelope_status(envelope: dict[str, Any], what: str = "the call") -> int:
    """0 for an ``ok`` envelope; else its error on stderr (``error <code>: <message>``) and 1."""
    if envelope.get("ok") is True:
        return EXIT_OK
    error = envelope.get("error")
    error = error if isinstance(error, dict) else {}
    code = one_line(str(error.get("code") or "unknown"))
    message = printable(str(error.get("message") or f"{what} failed"), keep_newlines=True)
    err(f"error {code}: {message}")
    return EXIT_FAILED
