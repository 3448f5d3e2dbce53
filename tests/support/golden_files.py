"""Golden files: cases rendered as readable text, masked, compared or re-recorded.

Each golden test collects its cases in a ``Golden`` (a heading, then labelled
sections) and ends with ``check``: the text, masked by its ``Masker``, must equal
``tests/golden/<name>.txt``; ``MCP_SUPERVISOR_UPDATE_GOLDENS=1`` writes it instead,
so a change meant to alter what users see re-records on purpose and is reviewed
as a diff.
"""

from __future__ import annotations

import difflib
import os
import re

import pytest

from tests.support.paths import GOLDEN

GOLDEN_DIR = GOLDEN
UPDATE = os.environ.get("MCP_SUPERVISOR_UPDATE_GOLDENS") == "1"
MASKING = (
    "Masked: what differs from run to run, the kernel's <port> and the ids the server makes up "
    "as <kind-N> (N by first sighting, so the same id coming back is pinned). Bytes are "
    "shown as UTF-8, other bytes and control characters (but a line feed) as \\xNN, a run "
    "of 32 or more of one character as <'c' * N>. Left out of HTTP answers: the Date header, "
    "and the keep-alive comments of an SSE body (whether one falls between two events is timing)."
)


def show(data: bytes) -> str:
    """Bytes as readable text: UTF-8, other bytes and control characters (but a line
    feed) as ``\\xNN``, a run of 32 or more of one character as ``<'c' * N>``."""
    text = data.decode("utf-8", "backslashreplace")
    text = re.sub(r"(.)\1{31,}", lambda m: f"<{m.group(1)!r} * {len(m.group())}>", text, flags=re.DOTALL)
    return re.sub(r"[\x00-\x09\x0b-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", text)


class Masker:
    """Replaces what differs from run to run with a placeholder: ``<kind-N>``, N by
    first sighting, so a value that comes back later is pinned as the same one."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._counts: dict[str, int] = {}

    def name(self, value: str, kind: str) -> str:
        """``value``'s placeholder (a new one, ``<kind-N>``, on first sight)."""
        if value not in self._names:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            self._names[value] = f"<{kind}-{self._counts[kind]}>"
        return self._names[value]

    def fixed(self, value: str, placeholder: str) -> None:
        """``value`` is always ``placeholder`` (a port: there is one)."""
        self._names[value] = placeholder

    def mask(self, text: str) -> str:
        for value in sorted(self._names, key=len, reverse=True):
            text = text.replace(value, self._names[value])
        return text


def port_masker(port: int) -> Masker:
    """A masker that knows the server's port (ids are named as they are seen)."""
    masker = Masker()
    for host in ("127.0.0.1", "localhost"):
        masker.fixed(f"{host}:{port}", f"{host}:<port>")
    return masker


class Golden:
    """The cases of one golden file, in order; ``check`` compares or re-records."""

    def __init__(self, name: str, about: str, rerecord: str, masker: Masker) -> None:
        self.path = GOLDEN_DIR / f"{name}.txt"
        self.about = about
        self.rerecord = rerecord
        self.masker = masker
        self.parts: list[str] = []

    def case(self, title: str, *sections: tuple[str, str]) -> None:
        """One case: a heading, then each (label, text) section."""
        body = "".join(f"{label}\n{text}\n" for label, text in sections)
        self.parts.append(f"## {title}\n{body}")

    def text(self) -> str:
        about = "".join(f"# {line}\n" if line else "#\n" for line in self.about.strip().splitlines())
        header = (
            f"{about}#\n# Re-record on purpose (and review the diff with the change):\n"
            f"#   MCP_SUPERVISOR_UPDATE_GOLDENS=1 .venv/bin/python -m pytest {self.rerecord}\n"
            f"#\n# {MASKING}\n"
        )
        return self.masker.mask(header + "\n" + "\n".join(self.parts))

    def check(self) -> None:
        """The text must be the file's (or, re-recording, becomes it)."""
        text = self.text()
        if UPDATE or not self.path.exists():
            self.path.parent.mkdir(exist_ok=True)
            self.path.write_text(text, encoding="utf-8")
            if not UPDATE:
                pytest.fail(f"recorded {self.path} for the first time; review and commit it")
        expected = self.path.read_text(encoding="utf-8")
        if text != expected:
            name = self.path.name
            diff = difflib.unified_diff(
                expected.splitlines(), text.splitlines(), f"{name} (golden)", "this run", lineterm=""
            )
            pytest.fail("\n".join(diff), pytrace=False)
