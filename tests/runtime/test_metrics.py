"""``/metrics`` as a scraper reads it: sample values exact."""

from __future__ import annotations

import math

from supervisor.runtime.metrics import sample_value


def test_sample_values_are_exact() -> None:
    assert sample_value(1_234_567) == "1234567"  # not 1.23457e+06
    assert sample_value(0.000123456789) == "0.000123456789"
    assert (sample_value(math.inf), sample_value(math.nan)) == ("+Inf", "NaN")
