"""What-if patches for ``bench_calls.py --client ours --what-if NAME[,NAME]``.

A patch is a candidate optimization of our call path, applied by monkeypatching inside
the benchmark process only, so its gain can be measured in the same run as the
unpatched path before anyone implements it. Register one in ``PREPARE`` (class-level,
applied before ``Supervisor.open``) or ``PATCHES`` (applied to the running supervisor)
and list it in ``run.py``'s ``WHAT_IFS``.

Every candidate of the first full run (linger, policy, validate, drain, nowait, direct,
reply, turncache) is now in the code itself — see RESULTS.md for what each one measured
before and after. Registered now are two bounds, not candidates: what the audit row and
the call event cost on the call path (both are promised per call, so neither can go).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PREPARE: dict[str, Callable[[], None]] = {}


def _no_audit(sup: Any) -> None:
    """Bound, not candidate: the call path without its audit row reaching the store
    (no store batches, no SQLite thread competing for the CPU): what the store costs."""

    async def audit(message: Any) -> None:
        return None

    sup.audit = audit


def _no_events(sup: Any) -> None:
    """Bound, not candidate: no call event published, no metrics counted."""
    sup.events.publish = lambda event: None
    sup.metrics.observe_call = lambda outcome, duration_ms: None


PATCHES: dict[str, Callable[[Any], None]] = {"noaudit": _no_audit, "noevents": _no_events}
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
