"""The reconnect schedule: how long to wait before attempt N, and when to start over.

Default (a contract: the README promises it): about 1 s, 2 s, 5 s, 15 s, 60 s, then
about every 60 s; a connection that stayed steady for 60 s starts again from 1 s.
Configurable per server (``reconnect_schedule_s``).

Jitter (``reconnect_jitter``, 0.1 by default): each delay is moved by up to that
fraction of itself, either way, so that servers that failed together (a network
blip, a host's restart) do not all retry in the same instant, again and again. The
schedule stays pure: the random number is the caller's (``delay(attempt, draw)``,
``draw`` uniform in [0, 1)), drawn where the delay is chosen (``retry.py`` has the
process's generator; a test passes a seeded one).

The steps are tenacity's ``wait_chain`` of ``wait_fixed``; its jittering waits do not
fit: they draw from the ``random`` module's global generator (no seed of one's own,
no draw passed in) and add a fixed number of seconds, not a fraction of each delay.
tenacity's stop conditions read the wall clock, so we count attempts ourselves and
sleep on Trio's clock.
"""

from __future__ import annotations

from collections.abc import Sequence

import tenacity

MAX_JITTER = 0.5
"""The most a delay may move, as a fraction of itself: more would blur the schedule."""


def jittered(delay_s: float, jitter: float, draw: float) -> float:
    """``delay_s`` moved by up to ``jitter`` of itself, either way: ``draw`` 0 is the
    shortest, 0.5 the delay itself, towards 1 the longest."""
    return delay_s * (1.0 + jitter * (2.0 * draw - 1.0))


class ReconnectSchedule:
    """Delays by attempt number, with the last delay repeating forever, each moved by
    up to ``jitter`` of itself."""

    __slots__ = ("_state", "_wait", "delays", "jitter", "reset_after_s")

    def __init__(self, delays_s: Sequence[float], reset_after_s: float = 60.0, jitter: float = 0.0) -> None:
        if not delays_s or any(d < 0 for d in delays_s):
            raise ValueError("a reconnect schedule needs at least one non-negative delay")
        if not 0.0 <= jitter <= MAX_JITTER:
            raise ValueError(f"a reconnect jitter is a fraction from 0 to {MAX_JITTER:g}, got {jitter}")
        self.delays = tuple(float(d) for d in delays_s)
        self.reset_after_s = reset_after_s
        self.jitter = jitter
        self._wait = tenacity.wait_chain(*(tenacity.wait_fixed(d) for d in self.delays))
        # Only attempt_number is read by wait_chain; no Retrying object is involved.
        self._state = tenacity.RetryCallState(None, None, (), {})  # type: ignore[arg-type]

    def delay(self, attempt: int, draw: float = 0.5) -> float:
        """Seconds to wait before reconnect attempt ``attempt`` (1-based), placed within
        the jitter by ``draw`` (0.5: the schedule's own delay)."""
        self._state.attempt_number = max(1, attempt)
        return jittered(float(self._wait(self._state)), self.jitter, draw)

    def next_attempt(self, attempt: int, steady_for_s: float | None) -> int:
        """The attempt number after a failure: counting on, or 1 again after a long steady run."""
        if steady_for_s is not None and steady_for_s >= self.reset_after_s:
            return 1
        return attempt + 1
