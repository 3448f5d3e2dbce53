"""Ages as the console spells them (``console.js`` spells them the same way when it
ticks them on): two units at most, whole numbers; ticking spans carry their seconds."""

from __future__ import annotations

import pytest

from supervisor.console.ages import age_text, countdown, ticking_age


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, ""), (-3, "0 s"), (0.4, "0 s"), (59.9, "59 s"), (60, "1 min"), (192, "3 min 12 s"),
        (3600, "1 h"), (7500, "2 h 5 min"), (86400 * 3 + 3600 * 4 + 59, "3 d 4 h"),
    ],
)  # fmt: skip
def test_an_age_has_two_units_at_most(seconds: float | None, shown: str) -> None:
    assert age_text(seconds) == shown


def test_ticking_spans_carry_their_seconds_for_the_script() -> None:
    assert ticking_age(12.3456) == '<span class="age" data-age="12.346">12 s</span> ago'
    assert countdown(4.2) == '<span class="countdown" data-countdown="4.200">5 s</span>'  # whole seconds up
    assert countdown(0) == '<span class="countdown" data-countdown="0.000">0 s</span>'
    assert ticking_age(None) == "" and countdown(None) == ""
