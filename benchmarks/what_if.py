"""What-if patches for ``bench_calls.py --client ours --what-if NAME[,NAME]``.

A patch is a candidate optimization of our call path, applied by monkeypatching inside
the benchmark process only, so its gain can be measured in the same run as the
unpatched path before anyone implements it. Register one in ``PREPARE`` (class-level,
applied before ``Supervisor.open``) or ``PATCHES`` (applied to the running supervisor)
and list it in ``run.py``'s ``WHAT_IFS``.

Every candidate of the first full run (linger, policy, validate, drain, nowait, direct,
reply, turncache) is now in the code itself — see RESULTS.md for what each one measured
before and after. Registered now are bounds, not candidates: what the audit row, its
journal lines and the call event cost on the call path (all are promised per call).
(``nostore``, the row not queued for the store actor, and ``oswrite``, the journal's
lines written with ``os.write``, are what the code does since issue 37: the folder
process inserts the rows, so no thread of ours wants the GIL the write lets go of;
``journalthread`` needed an awaited ``finished``, which is gone.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PREPARE: dict[str, Callable[[], None]] = {}


def _no_audit(sup: Any) -> None:
    """Bound, not candidate: the call path without its audit row (no journal lines, so
    nothing for the folder process either): what the audit costs."""
    from supervisor.calls.audit_trail import AuditTrail

    trail: Any = AuditTrail  # frozen: patched on the class, in this process only
    trail.finished = lambda self, row: None
    trail.started = lambda self, row: None


def _no_journal(sup: Any) -> None:
    """Bound: no journal line written (and so no row for the folder): what making rows
    durable before the answer costs."""
    sup.journal.started = lambda row: None
    sup.journal.finished = lambda row: None


def _no_events(sup: Any) -> None:
    """Bound, not candidate: no call event published, no metrics counted."""
    sup.events.publish = lambda event: None
    sup.metrics.observe_call = lambda server, outcome, seconds: None


PATCHES: dict[str, Callable[[Any], None]] = {
    "noaudit": _no_audit,
    "nojournal": _no_journal,
    "noevents": _no_events,
}
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
