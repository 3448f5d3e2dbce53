"""Ages and clock times as the console shows them: short, coarse, and the same on every
page (``console.js`` ticks them on with the same rules, so a page never shows two
spellings of one age)."""

from __future__ import annotations

import time
from html import escape


def age_text(seconds: float | None) -> str:
    """``4 s``, ``3 min 12 s``, ``2 h 5 min``, ``3 d 4 h``: two units at most, whole numbers
    (an unknown age: empty)."""
    if seconds is None:
        return ""
    whole = max(0, int(seconds))
    for unit, size, smaller, small_size in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "min", 60),
        ("min", 60, "s", 1),
    ):
        if whole >= size:
            rest = (whole % size) // small_size
            return f"{whole // size} {unit}" + (f" {rest} {smaller}" if rest else "")
    return f"{whole} s"


def clock_text(unix: float) -> str:
    """A moment as ``HH:MM:SS UTC`` (the date too when it is not today's)."""
    moment = time.gmtime(unix)
    shown = time.strftime("%H:%M:%S UTC", moment)
    if time.strftime("%Y-%m-%d", moment) != time.strftime("%Y-%m-%d", time.gmtime()):
        shown = time.strftime("%Y-%m-%d ", moment) + shown
    return shown


def ticking_age(seconds: float | None) -> str:
    """An age that ``console.js`` keeps counting up (empty when unknown)."""
    if seconds is None:
        return ""
    return f'<span class="age" data-age="{seconds:.3f}">{escape(age_text(seconds))}</span> ago'


def countdown(seconds: float | None) -> str:
    """The seconds to the next retry, which ``console.js`` counts down."""
    if seconds is None:
        return ""
    return (
        f'<span class="countdown" data-countdown="{seconds:.3f}">{escape(age_text(seconds + 0.999))}</span>'
    )
