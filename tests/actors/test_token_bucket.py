"""The token bucket a rate limit keeps: looking without spending, how long until the
next token, and a new rate and burst that keep the tokens it holds."""

from __future__ import annotations

import pytest

from actors.token_bucket import TokenBucket


def test_ready_looks_without_spending() -> None:
    bucket = TokenBucket(10.0, 2)
    assert bucket.ready(0.0) and bucket.ready(0.0)
    assert bucket.take(0.0) and bucket.take(0.0)
    assert not bucket.ready(0.0) and not bucket.take(0.0)


def test_retry_after_is_the_wait_for_the_next_token() -> None:
    bucket = TokenBucket(50.0, 1)
    assert bucket.retry_after(0.0) == 0.0
    assert bucket.take(0.0)
    assert bucket.retry_after(0.0) == pytest.approx(0.02)
    assert bucket.retry_after(0.015) == pytest.approx(0.005)
    assert not bucket.take(0.0199)
    assert bucket.take(0.02 + 1e-9)


def test_retune_keeps_the_tokens_and_counts_what_came_back_at_the_old_rate() -> None:
    bucket = TokenBucket(1.0, 10)
    for _ in range(10):
        assert bucket.take(0.0)
    bucket.retune(2.0, 100.0, 5)  # 2 s at 1/s: two tokens back, then 100/s
    assert bucket.take(2.0) and bucket.take(2.0) and not bucket.take(2.0)
    assert bucket.retry_after(2.0) == pytest.approx(0.01)
    bucket.retune(10.0, 100.0, 3)  # full again, but the new burst caps it
    assert [bucket.take(10.0) for _ in range(4)] == [True, True, True, False]


def test_a_bad_rate_or_burst_is_refused() -> None:
    with pytest.raises(ValueError, match="positive rate"):
        TokenBucket(1.0, 1).retune(0.0, 0.0, 1)
