"""The last lines a stdio server wrote to stderr: redacted, cut, bounded.

Split from ``stdio.py``: pure bookkeeping over the chunks the hub reads (no I/O, no
trio), so memory stays bounded whatever a server writes: at most
:data:`STDERR_TAIL_LINES` lines of at most :data:`STDERR_LINE_MAX` characters, and
never more than one line's worth of bytes held while a line is still being written.
"""

from __future__ import annotations

import collections

from actors.log_events import get_logger
from actors.redaction import Redactor

_log = get_logger("actors.transports.stdio")

STDERR_TAIL_LINES = 200
# A line longer than this is cut: one 10 MB line must not become 10 MB of memory.
STDERR_LINE_MAX = 4096
CUT_MARKER = " …[cut]"


class StderrTail:
    """Lines split from stderr chunks; each redacted before it is kept or logged."""

    __slots__ = ("_keep", "_lines", "_name", "_partial", "_redactor", "_skipping")

    def __init__(self, name: str, redactor: Redactor) -> None:
        self._name = name
        self._redactor = redactor
        self._lines: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        # Enough bytes past the cut that a secret straddling it is still seen whole.
        self._keep = STDERR_LINE_MAX + redactor.longest_secret
        self._partial = bytearray()
        self._skipping = False  # inside an over-long line whose head was already kept

    def lines(self) -> list[str]:
        """The kept lines, oldest first (a copy)."""
        return list(self._lines)

    def feed(self, chunk: bytes | bytearray) -> None:
        """Split a chunk into lines; never hold more than ``_keep`` bytes of one line."""
        start = 0
        while start < len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            if not self._skipping:
                room = self._keep - len(self._partial)
                self._partial += chunk[start : min(end, start + room)]
                if end - start > room:
                    self._keep_line(bytes(self._partial), cut=True)
                    self._partial.clear()
                    self._skipping = True
            if newline < 0:
                return
            if self._skipping:
                self._skipping = False
            else:
                self._keep_line(bytes(self._partial), cut=False)
                self._partial.clear()
            start = newline + 1

    def end(self) -> None:
        """EOF: a last line without its newline is still a line."""
        if self._partial and not self._skipping:
            self._keep_line(bytes(self._partial), cut=False)
        self._partial.clear()

    def _keep_line(self, raw: bytes, *, cut: bool) -> None:
        text = self._redactor.redact(raw.decode("utf-8", "replace").rstrip("\r"))
        if cut or len(text) > STDERR_LINE_MAX:
            text = text[:STDERR_LINE_MAX] + CUT_MARKER
        self._lines.append(text)
        _log.debug("stderr", extra={"fields": {"server": self._name, "line": text}})
