"""A server's reconnect schedule, and the random draws its jitter takes.

``schedule.py`` is pure: it places a delay within its jitter by a number it is given.
The number is drawn here, where a delay is chosen (a connection's failure, a warm
spare's loss, a dial-out peer's drop, a crashed actor's parking), from the process's
generator; tests pass a seeded ``Draw`` of their own, or seed ``GENERATOR``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from actors.connection.schedule import ReconnectSchedule
from actors.spec import ServerSpec

Draw = Callable[[], float]
"""A random number, uniform in [0, 1): where a delay falls within its jitter."""

GENERATOR = random.Random()
"""The process's generator for jitter (spreading retries, not secrets)."""


def draw() -> float:
    """A uniform draw in [0, 1) from ``GENERATOR``."""
    return GENERATOR.random()


def schedule_of(spec: ServerSpec) -> ReconnectSchedule:
    """The reconnect schedule a server's spec configures."""
    return ReconnectSchedule(spec.reconnect_schedule_s, spec.reset_after_s, spec.reconnect_jitter)
