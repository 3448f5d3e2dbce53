"""Typed readers for JSON config values that fail with a located, fixable message.

Every reader takes a value and its JSON path (``$.servers.time.command``) and raises
``Invalid(path, problem)``; the loader adds the file name and turns it into
``ConfigError``. Messages say what was found and what to write instead, because the
person reading them is fixing a file by hand.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from collections.abc import Collection, Mapping
from typing import Any

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")
# Names whose values are credentials even when written literally in the file.
SENSITIVE_NAME = re.compile(r"auth|token|secret|key|passw|cookie|credential", re.IGNORECASE)
_SHOW_LIMIT = 60


class Invalid(Exception):
    """A problem at one place of the document (the file name is added by the loader)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def visible(text: str) -> str:
    """``text`` with control, bidi and other invisible characters escaped (``\\u202e``).

    Messages quote what the file holds; escaped, they stay one line and cannot reorder
    or recolour the operator's terminal.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def child(path: str, key: str | int) -> str:
    """The JSON path of ``key`` inside ``path``: ``$.a.b``, ``$.a[0]``, ``$.a["x y"]``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _PLAIN_KEY.match(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def show(value: object) -> str:
    """A short JSON rendering of ``value`` for ``got …`` in messages."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return "a deeply nested value"
    if len(text) > _SHOW_LIMIT:
        return text[: _SHOW_LIMIT - 3] + "..."
    return text


def unknown_key_problem(key: str, allowed: Collection[str]) -> str:
    """``unknown key 'comand' (did you mean 'command'?)``, or the list of allowed keys."""
    guess = suggest(key, allowed)
    if guess is not None:
        return f"unknown key {key!r} (did you mean {guess!r}?)"
    return f"unknown key {key!r}; allowed keys are {', '.join(sorted(allowed))}"


def suggest(key: str, allowed: Collection[str]) -> str | None:
    """The allowed key ``key`` was probably meant to be (case and ``_``/``-`` ignored)."""

    def fold(name: str) -> str:
        return name.lower().replace("_", "").replace("-", "")

    folded = {fold(name): name for name in allowed}
    if fold(key) in folded:
        return folded[fold(key)]
    close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
    return close[0] if close else None


def check_keys(obj: Mapping[str, Any], path: str, allowed: Collection[str]) -> None:
    """Reject keys outside ``allowed`` (a typo must not silently drop a setting)."""
    for key in obj:
        if key not in allowed:
            raise Invalid(path, unknown_key_problem(key, allowed))


def expect_object(value: object, path: str, what: str = "an object") -> Mapping[str, Any]:
    """``value`` as a JSON object."""
    if not isinstance(value, dict):
        raise Invalid(path, f"expected {what}, got {show(value)}")
    return value


def expect_list(value: object, path: str, what: str = "a list") -> list[Any]:
    """``value`` as a JSON array."""
    if not isinstance(value, list):
        raise Invalid(path, f"expected {what}, got {show(value)}")
    return value


def expect_bool(value: object, path: str) -> bool:
    """``value`` as true/false (not 0/1 or "true": those are usually mistakes)."""
    if not isinstance(value, bool):
        raise Invalid(path, f"expected true or false, got {show(value)}")
    return value


def expect_int(value: object, path: str, *, minimum: int) -> int:
    """``value`` as a whole number of at least ``minimum``."""
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(path, f"expected a whole number, got {show(value)}")
    if value < minimum:
        raise Invalid(path, f"expected a number of at least {minimum}, got {value}")
    return value


def expect_number(value: object, path: str, *, positive: bool) -> float:
    """``value`` as a finite number, > 0 when ``positive`` else >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(path, f"expected a number, got {show(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise Invalid(path, f"expected a finite number, got {show(value)}")
    if positive and number <= 0:
        raise Invalid(path, f"expected a number greater than 0, got {show(value)}")
    if not positive and number < 0:
        raise Invalid(path, f"expected a number of at least 0, got {show(value)}")
    return number


def check_os_string(value: str, path: str, *, expanded: bool = False) -> None:
    """Refuse what no program argument, environment entry or path can hold.

    The OS refuses a NUL byte; a lone surrogate (a JSON ``\\ud800`` escape) has no
    encoding. Caught here, such a value is one config error instead of a server that
    fails every start. ``expanded``: the value came through ``${…}``, say so (the
    value itself is a secret and is never shown).
    """
    source = " (it comes from a ${…} reference's value)" if expanded else ""
    if "\0" in value:
        raise Invalid(
            path,
            f"contains a NUL character{source}, which no program argument, environment "
            "variable or path can hold; remove it",
        )
    try:
        os.fsencode(value)
    except UnicodeEncodeError:
        raise Invalid(
            path,
            f"contains a lone surrogate (an unpaired \\ud800-\\udfff escape){source}, which "
            "cannot be encoded for the operating system; remove it",
        ) from None


def expect_choice(value: str, raw: str, path: str, choices: Collection[str]) -> str:
    """``value`` (already expanded from ``raw``) as one of ``choices``."""
    if value in choices:
        return value
    options = " or ".join(repr(choice) for choice in choices)
    guess = suggest(value, choices)
    hint = f" (did you mean {guess!r}?)" if guess is not None else ""
    raise Invalid(path, f"expected {options}, got {show(raw)}{hint}")
