"""A token bucket: at most ``rate_per_s`` events a second on average, ``burst`` at once.

Why: a bound that lets a short burst through whole (a server logging its start-up)
but holds a flood to a steady rate. Pure: the caller says what time it is, so it runs
on Trio's clock (and on a test's ``MockClock``).
"""

from __future__ import annotations


def _checked(rate_per_s: float, burst: int) -> None:
    if rate_per_s <= 0 or burst < 1:
        raise ValueError(
            f"a token bucket needs a positive rate and a burst of at least 1, got {rate_per_s}/s, {burst}"
        )


class TokenBucket:
    """``take(now)`` spends a token if one is left; tokens come back at ``rate_per_s``,
    up to ``burst``. It starts full."""

    __slots__ = ("_at", "_tokens", "burst", "rate_per_s")

    def __init__(self, rate_per_s: float, burst: int) -> None:
        _checked(rate_per_s, burst)
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._tokens = float(burst)
        self._at: float | None = None

    def _refill(self, now: float) -> float:
        """The tokens at ``now`` (what came back since the last look added)."""
        if self._at is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate_per_s)
        self._at = now
        return self._tokens

    def take(self, now: float) -> bool:
        """Whether an event at ``now`` fits (and spend its token)."""
        if self._refill(now) < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def ready(self, now: float) -> bool:
        """Whether an event at ``now`` would fit (nothing is spent): so that a caller
        bound by several buckets takes from all of them or from none."""
        return self._refill(now) >= 1.0

    def retry_after(self, now: float) -> float:
        """Seconds from ``now`` until the next token is back (0: one is there)."""
        return max(0.0, (1.0 - self._refill(now)) / self.rate_per_s)

    def retune(self, now: float, rate_per_s: float, burst: int) -> None:
        """A new rate and burst from ``now`` on, keeping the tokens it holds (what
        came back until ``now`` at the old rate; at most the new burst)."""
        _checked(rate_per_s, burst)
        self._refill(now)
        self.rate_per_s, self.burst = rate_per_s, burst
        self._tokens = min(float(burst), self._tokens)
