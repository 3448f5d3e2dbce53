"""Terminal text for the CLI's client commands: safe, and cut to the width.

Text that comes from MCP servers (error messages, descriptions, progress messages) is
shown with control characters replaced (``printable``): a server must not be able to
move the operator's cursor, retitle the terminal or hide lines with escape sequences.
Tables are aligned and cut to the terminal's width (not cut at all with ``--wide`` or
when stdout is no terminal); the progress line on stderr is
redrawn in place, and only on a terminal.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import unicodedata
from collections.abc import Sequence
from typing import TextIO

_GAP = "  "
_MIN_LAST_COLUMN = 12
_CUT = "..."
_CLEAR_LINE = "\r\x1b[K"
_SPACE = re.compile(r"\s+")


def printable(text: str, keep_newlines: bool = False) -> str:
    """``text`` with control characters (C0, C1, DEL; newlines too unless kept) as ``?``."""
    return "".join(
        "?" if unicodedata.category(char) == "Cc" and not (keep_newlines and char == "\n") else char
        for char in text
    )


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` printable on one line (runs of whitespace as one space), maybe cut."""
    flat = printable(_SPACE.sub(" ", text).strip())
    return flat if limit is None else cut(flat, limit)


class Tailed(str):
    """A cell whose tail stays whole when it is cut (``error... (5m ago)``): the tail
    says what the cut part is about, so it is the last thing to lose."""

    tail: str
    head: str

    def __new__(cls, head: str, tail: str) -> Tailed:
        cell = super().__new__(cls, f"{head} {tail}")
        cell.head, cell.tail = head, tail
        return cell


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, ending in ``...`` when shortened (before
    the tail of a ``Tailed`` text, when the width has room for it)."""
    if len(text) <= width:
        return text
    if isinstance(text, Tailed) and width > len(text.tail) + len(_CUT) + 1:
        return f"{cut(text.head, width - len(text.tail) - 1)} {text.tail}"
    if width <= len(_CUT):
        return text[:width]
    return text[: width - len(_CUT)] + _CUT


def terminal_width() -> int:
    """Columns of the terminal (``$COLUMNS`` first, 80 when there is none)."""
    return shutil.get_terminal_size().columns


def table_width(stream: TextIO, wide: bool = False) -> int | None:
    """Where a table on ``stream`` is cut: the terminal's width (``$COLUMNS`` overrides
    what the terminal reports). None, nothing cut, with ``--wide`` or when ``stream`` is
    no terminal: a pipe or a file wants whole lines (as ``ps | cat`` gives them), and a
    ``$COLUMNS`` that leaked into a non-interactive environment says nothing about it."""
    if wide or not is_terminal(stream):
        return None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):  # no real file behind the stream
        return None


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or no real file behind it
        return False


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None) -> list[str]:
    """Left-aligned columns two spaces apart; the last column gets the room that is left
    (at least a few characters, so a narrow terminal still shows the start of it), or
    all it needs when ``width`` is None."""
    widths = [max([len(headers[i])] + [len(row[i]) for row in rows]) for i in range(len(headers) - 1)]
    fixed = sum(widths) + len(_GAP) * (len(headers) - 1)
    room = None if width is None else max(width - fixed, len(headers[-1]), _MIN_LAST_COLUMN)
    lines = []
    for cells in [headers, *rows]:
        parts = [cell.ljust(w) for cell, w in zip(cells[:-1], widths, strict=True)]
        last = cells[-1] if room is None else cut(cells[-1], room)
        lines.append(_GAP.join([*parts, last]).rstrip())
    return lines


def cell(value: object) -> str:
    """A table cell: ``-`` for nothing, ``yes``/``no``, whole numbers without ``.0``."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return one_line(str(value))


def format_retry(state: object, retry_in_s: object) -> str:
    """The RETRY column: a countdown (rounded up, so it never says 0 while waiting) for a
    server in backoff, ``-`` for anyone else."""
    if state != "backoff" or isinstance(retry_in_s, bool) or not isinstance(retry_in_s, int | float):
        return "-"
    seconds = math.ceil(retry_in_s)
    return "now" if seconds <= 0 else f"in {duration(seconds)}"


def format_error(error: object, age_s: object) -> str:
    """The LAST ERROR column: the error and how long ago it happened (an error stays
    after its server came back, so its age tells news from history)."""
    text = cell(error)
    if text == "-" or isinstance(age_s, bool) or not isinstance(age_s, int | float):
        return text
    return Tailed(text, f"({duration(max(0, math.floor(age_s)))} ago)")


def duration(seconds: int) -> str:
    """A whole number of seconds, short: ``12s``, ``1m05s``, ``1h02m``, ``3d04h``."""
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def format_progress(data: object) -> str | None:
    """``progress 2/5: message`` from a ``progress`` event's data (None if unusable)."""
    if not isinstance(data, dict) or data.get("progress") is None:
        return None
    line = f"progress {_number(data['progress'])}"
    if data.get("total") is not None:
        line += f"/{_number(data['total'])}"
    if data.get("message"):
        line += f": {data['message']}"
    return one_line(line)


class Progress:
    """One status line on stderr, redrawn in place; silent unless stderr is a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.enabled = stream.isatty()
        self._shown = False

    def show(self, line: str) -> None:
        if not self.enabled:
            return
        # One column short of the width: a full line would wrap on some terminals, and
        # a wrapped line can no longer be redrawn with a carriage return.
        self._stream.write(_CLEAR_LINE + cut(line, max(terminal_width() - 1, 10)))
        self._stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._stream.write(_CLEAR_LINE)
            self._stream.flush()
            self._shown = False
