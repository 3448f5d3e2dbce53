"""The reconnect schedule: how long to wait before attempt N, and when to start over.

Default (a contract: the README promises it): 1 s, 2 s, 5 s, 15 s, 60 s, then every
60 s; a connection that stayed steady for 60 s starts again from 1 s. Configurable per
server (``reconnect_schedule_s``). Pure: the actor asks, then sleeps on Trio's clock
(tenacity's own stop conditions read the wall clock, so we count attempts ourselves
and only borrow its wait strategies).
"""

from __future__ import annotations

from collections.abc import Sequence

import tenacity


class ReconnectSchedule:
    """Delays by attempt number, with the last delay repeating forever."""

    __slots__ = ("_state", "_wait", "delays", "reset_after_s")

    def __init__(self, delays_s: Sequence[float], reset_after_s: float = 60.0) -> None:
        if not delays_s or any(d < 0 for d in delays_s):
            raise ValueError("a reconnect schedule needs at least one non-negative delay")
        self.delays = tuple(float(d) for d in delays_s)
        self.reset_after_s = reset_after_s
        self._wait = tenacity.wait_chain(*(tenacity.wait_fixed(d) for d in self.delays))
        # Only attempt_number is read by wait_chain; no Retrying object is involved.
        self._state = tenacity.RetryCallState(None, None, (), {})  # type: ignore[arg-type]

    def delay(self, attempt: int) -> float:
        """Seconds to wait before reconnect attempt ``attempt`` (1-based)."""
        self._state.attempt_number = max(1, attempt)
        return float(self._wait(self._state))

    def next_attempt(self, attempt: int, steady_for_s: float | None) -> int:
        """The attempt number after a failure: counting on, or 1 again after a long steady run."""
        if steady_for_s is not None and steady_for_s >= self.reset_after_s:
            return 1
        return attempt + 1
