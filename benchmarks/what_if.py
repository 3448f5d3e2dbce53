"""What-if patches for ``bench_calls.py --client ours --what-if NAME[,NAME]``.

A patch is a candidate optimization of our call path, applied by monkeypatching inside
the benchmark process only, so its gain can be measured in the same run as the
unpatched path before anyone implements it. Register one in ``PREPARE`` (class-level,
applied before ``Supervisor.open``) or ``PATCHES`` (applied to the running supervisor)
and list it in ``run.py``'s ``WHAT_IFS``.

None is registered today: every candidate of the first full run (linger, policy,
validate, drain, nowait, direct, reply, turncache) is now in the code itself — see
RESULTS.md for what each one measured before and after.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PREPARE: dict[str, Callable[[], None]] = {}
PATCHES: dict[str, Callable[[Any], None]] = {}
NAMES = tuple(PREPARE) + tuple(PATCHES)


def prepare(names: list[str]) -> None:
    """Apply the class-level patches among ``names`` (before ``Supervisor.open``)."""
    unknown = set(names) - set(NAMES)
    if unknown:
        known = ", ".join(NAMES) or "none"
        raise SystemExit(f"unknown what-if patch: {', '.join(sorted(unknown))}; known: {known}")
    for name in names:
        if name in PREPARE:
            PREPARE[name]()


def apply(names: list[str], sup: Any) -> None:
    """Apply the instance-level patches among ``names`` to a running supervisor."""
    for name in names:
        if name in PATCHES:
            PATCHES[name](sup)
