"""What a trust rule's ``pattern`` is matched against: a call's candidates.

Pure functions, no Trio, no I/O. A pattern is a glob over one string; a call's
arguments are JSON. The candidates bridge the two:

- A tool whose ``inputSchema`` declares a subject argument (a key in SUBJECT_KEYS, at
  any depth of its ``properties``) is checked on those arguments only: every string in
  the call under such a key, at any depth. Paths are normalized lexically; a command is
  one candidate, its text joined with its ``args`` list.
- Any other tool is checked on every string value in its arguments, at any depth.

The choice is the tool's, made from its published schema, never the call's: a call
that adds a ``path`` its tool never declared cannot narrow the check to that
harmless-looking value. ``actors/router/trust.py`` says how rules combine candidates
(deny and ask: any; allow: every; none: matched as one empty string).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

__all__ = ["SUBJECT_KEYS", "Candidate", "candidates_of", "declares_subject_arguments", "normalized_key"]

# The names a path- or URL-like argument (or a command) goes by, compared lower-cased
# without "_" and "-" (filePath, file_path and file-path are one key). Not ``query`` or
# ``name``: neither names a place, and a tool that declared one would have every other
# string (a message, a body) escape a deny.
SUBJECT_KEYS: frozenset[str] = frozenset(
    ("path", "filepath", "filename", "file", "directory", "url", "uri", "command", "cmd")
)
_PATH_KEYS = frozenset(("path", "filepath", "filename", "file", "directory"))
_COMMAND_KEYS = frozenset(("command", "cmd"))
_ARGV_KEYS = frozenset(("args", "argv", "arguments"))
# A schema is server data: its walk stops here and the tool is checked on every string.
_SCHEMA_NODE_BUDGET = 10_000
# A "." or ".." segment, or a leading "/": the string may name a path other than it reads.
_UNNORMALIZED = re.compile(r"^/|(?:^|/)\.{1,2}(?:/|$)")
_MAX_WHERE = 100

Location = tuple[str | int, ...]


def _normpath(path: str) -> str:
    """Lexically normalized; "//etc" is "/etc" on Linux, though POSIX lets normpath keep it."""
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def normalized_key(key: str) -> str:
    """``filePath``, ``file_path`` and ``file-path`` are one key: ``filepath``."""
    return key.lower().replace("_", "").replace("-", "")


@attrs.frozen(slots=True)
class Candidate:
    """One string a pattern is matched against, and where in the arguments it was."""

    location: Location
    text: str

    def where(self) -> str:
        """The location as ``files[1].path`` (keys JSON-quoted when not plain words)."""
        parts: list[str] = []
        for step in self.location:
            if isinstance(step, int):
                parts.append(f"[{step}]")
            elif step.isidentifier():
                parts.append(f".{step}" if parts else step)
            else:
                parts.append(f"[{json.dumps(step)}]")
        where = "".join(parts) or "the arguments"
        return where if len(where) <= _MAX_WHERE else where[: _MAX_WHERE - 1] + "…"


def _children(value: Any, where: Location) -> list[tuple[Any, Location]]:
    """A container's items in a fixed order (keys sorted), so key order never matters."""
    if isinstance(value, Mapping):
        items = sorted(((str(k), v) for k, v in value.items()), key=lambda kv: kv[0])
        return [(v, (*where, k)) for k, v in items]
    if isinstance(value, list | tuple):
        return [(v, (*where, i)) for i, v in enumerate(value)]
    return []


def _strings(value: Any, where: Location) -> Iterator[tuple[Location, str]]:
    """Every string in ``value`` at any depth, in document order; no recursion."""
    stack: list[tuple[Any, Location]] = [(value, where)]
    seen: set[int] = set()
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            yield at, item
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        stack.extend(reversed(_children(item, at)))


def _every_string(arguments: Any) -> list[Candidate]:
    found: list[Candidate] = []
    for at, text in _strings(arguments, ()):
        found.append(Candidate(at, text))
        if _UNNORMALIZED.search(text):
            normal = _normpath(text)
            if normal != text:  # "/tmp/../etc/passwd" is also checked as "/etc/passwd"
                found.append(Candidate(at, normal))
    return found


def _subject_values(kind: str, value: Any, at: Location, siblings: Any) -> list[Candidate]:
    if kind in _COMMAND_KEYS:
        words = [text for _, text in _strings(value, at)]
        for extra, where in _children(siblings, at[:-1]):
            if normalized_key(str(where[-1])) in _ARGV_KEYS:
                words.extend(text for _, text in _strings(extra, where))
        return [Candidate(at, " ".join(words))] if words else []
    if kind in _PATH_KEYS:
        # "/tmp/../etc/passwd" must not pass "/tmp/*"; an empty path stays empty.
        return [Candidate(w, _normpath(t) if t else t) for w, t in _strings(value, at)]
    return [Candidate(w, t) for w, t in _strings(value, at)]


def _subject_arguments(arguments: Any) -> list[Candidate]:
    found: list[Candidate] = []
    stack: list[tuple[Any, Location]] = [(arguments, ())]
    seen: set[int] = set()
    while stack:
        item, at = stack.pop()
        if not isinstance(item, Mapping | list | tuple) or id(item) in seen:
            continue
        seen.add(id(item))
        below: list[tuple[Any, Location]] = []
        for child, where in _children(item, at):
            key = where[-1]
            kind = normalized_key(key) if isinstance(key, str) and isinstance(item, Mapping) else ""
            if kind in SUBJECT_KEYS:
                found.extend(_subject_values(kind, child, where, item))
            else:
                below.append((child, where))
        stack.extend(reversed(below))
    return found


def candidates_of(arguments: Any, *, subject_arguments: bool) -> tuple[Candidate, ...]:
    """The strings a rule's ``pattern`` is matched against, for one call.

    ``subject_arguments``: the tool declares one (``declares_subject_arguments``), so
    only those are candidates; otherwise every string value is, and one that may be a
    path other than it reads ("/tmp/../etc/passwd") is also a candidate normalized.
    Never raises, however deep or odd the arguments (no recursion).
    """
    found = _subject_arguments(arguments) if subject_arguments else _every_string(arguments)
    return tuple(found)


def declares_subject_arguments(input_schema: Any) -> bool:
    """Whether a tool's ``inputSchema`` names a SUBJECT_KEYS property, at any depth.

    Any ``properties`` object counts (under ``items``, ``anyOf``, ``$defs`` …). A schema
    too large to walk counts as declaring none: its tool is checked on every string.
    """
    stack: list[Any] = [input_schema]
    budget = _SCHEMA_NODE_BUDGET
    while stack and budget > 0:
        node = stack.pop()
        budget -= 1
        if isinstance(node, Mapping):
            properties = node.get("properties")
            if isinstance(properties, Mapping) and any(
                isinstance(k, str) and normalized_key(k) in SUBJECT_KEYS for k in properties
            ):
                return True
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return False
