"""Bounds on what a server entry may say: its name and its timeouts.

A server's name ends up in URLs (``/v1/servers/<name>``), pidfiles, log lines, tool ids
and the environment of its process, so it must be short, visible and free of path
syntax. Timeouts are bounded so that a typo such as ``1e300`` is an error, not a call
that may wait until the sun burns out; the bounds are far above any real need.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.spec import DEFAULT_CALL_TIMEOUT_S

from .values import Invalid, child, expect_number, show

MAX_NAME_LENGTH = 64
# (most milliseconds, how the message says it)
INIT_TIMEOUT_LIMIT = (3_600_000, "1 hour")
CALL_TIMEOUT_LIMIT = (86_400_000, "24 hours")
MAX_CALL_LIMIT = (604_800_000, "7 days")

_PATH_SYNTAX = ("/", "\\", "..")


def check_server_name(name: str, path: str) -> None:
    """Refuse names that are empty, too long, invisible in parts, or look like paths."""
    if not name.strip():
        raise Invalid(path, "server names must not be empty; give the server a name")
    if len(name) > MAX_NAME_LENGTH:
        raise Invalid(
            path,
            f"server names are at most {MAX_NAME_LENGTH} characters, this one has {len(name)}; shorten it",
        )
    # Printable: no control, bidi, zero-width or other invisible character (space is fine).
    hidden = next((ch for ch in name if not ch.isprintable()), None)
    if hidden is not None:
        raise Invalid(
            path,
            f"server names must not contain control, bidi or invisible characters "
            f"(found U+{ord(hidden):04X}); rename the server",
        )
    syntax = next((bad for bad in _PATH_SYNTAX if bad in name), None)
    if syntax is not None:
        raise Invalid(
            path,
            f"server names must not contain {syntax!r}: the name is used in URLs and file "
            "names; rename the server",
        )


def millis(entry: Mapping[str, Any], key: str, path: str, limit: tuple[int, str]) -> float | None:
    """A positive millisecond setting of at most ``limit``, in seconds (None when absent)."""
    if key not in entry:
        return None
    where = child(path, key)
    value = expect_number(entry[key], where, positive=True)
    most, words = limit
    if value > most:
        raise Invalid(where, f"expected at most {most} ({words}), got {show(entry[key])}")
    return value / 1000


def call_timeouts(entry: Mapping[str, Any], path: str) -> tuple[float, float | None]:
    """``call_timeout_ms`` (alias ``timeout_ms``) and ``max_call_ms``, in seconds.

    Without ``max_call_ms`` the cap is ten call timeouts, but never above the bound
    ``max_call_ms`` itself has.
    """
    call_s = millis(entry, "call_timeout_ms", path, CALL_TIMEOUT_LIMIT)
    alias_s = millis(entry, "timeout_ms", path, CALL_TIMEOUT_LIMIT)
    if call_s is not None and alias_s is not None and call_s != alias_s:
        raise Invalid(
            child(path, "timeout_ms"),
            f"timeout_ms ({entry['timeout_ms']}) contradicts call_timeout_ms "
            f"({entry['call_timeout_ms']}); it is an alias, keep one",
        )
    call_s = call_s if call_s is not None else alias_s
    call_s = call_s if call_s is not None else DEFAULT_CALL_TIMEOUT_S
    max_call_s = millis(entry, "max_call_ms", path, MAX_CALL_LIMIT)
    if max_call_s is not None and max_call_s < call_s:
        raise Invalid(
            child(path, "max_call_ms"),
            f"{entry['max_call_ms']} is below the call timeout ({call_s * 1000:g} ms); "
            "the absolute cap must be at least the call timeout",
        )
    if max_call_s is None and 10 * call_s * 1000 > MAX_CALL_LIMIT[0]:
        max_call_s = MAX_CALL_LIMIT[0] / 1000
    return call_s, max_call_s
