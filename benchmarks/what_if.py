"""What-if patches for ``bench_calls.py --client ours --what-if NAME[,NAME]``.

A patch is a candidate optimization of our call path, applied by monkeypatching inside
the benchmark process only, so its gain can be measured in the same run as the
unpatched path before anyone implements it. Register one in ``PREPARE`` (class-level,
applied before ``Supervisor.open``) or ``PATCHES`` (applied to the running supervisor)
and list it in ``run.py``'s ``WHAT_IFS``.

Every candidate of the first full run (linger, policy, validate, drain, nowait, direct,
reply, turncache) is now in the code itself — see RESULTS.md for what each one measured
before and after. Registered now are bounds, not candidates: what the audit row, its
journal lines and the call event cost on the call path (all are promised per call), and
the roads not taken for the journal: ``journalthread``, its row line written from a
worker thread instead of on the event loop, and ``oswrite``, its lines written with
``os.write`` (which releases the GIL) instead of a write(2) that keeps it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PREPARE: dict[str, Callable[[], None]] = {}


def _no_audit(sup: Any) -> None:
    """Bound, not candidate: the call path without its audit row (no journal lines, no
    store batches, no SQLite thread competing for the CPU): what the audit costs."""
    from supervisor.calls.audit_trail import AuditTrail

    async def finished(self: Any, row: Any) -> None:
        return None

    trail: Any = AuditTrail  # frozen: patched on the class, in this process only
    trail.finished = finished
    trail.started = lambda self, row: None
    trail.finished_now = lambda self, row: None


def _no_journal(sup: Any) -> None:
    """Bound: the audit rows go to the store as before the journal, with no journal line
    written: what making rows durable before the answer costs."""
    sup.journal.started = lambda row: None
    sup.journal.finished = lambda row: None


def _no_store(sup: Any) -> None:
    """Bound for the journal folded in by another process (issue 37): the row line
    written as today, no row queued for the store actor (its batches, the SQLite thread
    and the GIL they take stay out of this process; the other process's CPU does not)."""
    from supervisor.calls.audit_trail import AuditTrail

    async def finished(self: Any, row: Any) -> None:
        receipt = self.journal.finished(row)
        if receipt is not None:
            receipt.settle(True)

    def finished_now(self: Any, row: Any) -> None:
        receipt = self.journal.finished(row)
        if receipt is not None:
            receipt.settle(True)

    trail: Any = AuditTrail  # frozen: patched on the class, in this process only
    trail.finished = finished
    trail.finished_now = finished_now


def _journal_in_a_thread(sup: Any) -> None:
    """The alternative: the call's row line written by a worker thread (the call waits
    for it) instead of on the event loop. The journal's bookkeeping stays on the loop and
    its own write of the row line is skipped; the thread writes the same line to a file
    beside it. The start line stays on the loop."""
    import os

    import trio

    from supervisor.calls.audit_trail import AuditTrail
    from supervisor.store import AddAudit
    from supervisor.store.journal import encode

    journal = sup.journal
    fd = os.open(journal.directory / "thread.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    async def finished(self: Any, row: Any) -> None:
        journal._in_flight.pop(row.record, None)
        await trio.to_thread.run_sync(os.write, fd, encode(row))
        await sup.store.put(AddAudit(row))

    trail: Any = AuditTrail  # frozen: patched on the class, in this process only
    trail.finished = finished


def _os_write(sup: Any) -> None:
    """The journal's lines written with ``os.write``, which releases the GIL around the
    system call (the journal keeps it, see ``supervisor.store.journal``)."""
    import os

    from supervisor.store import journal

    journal._write = os.write


def _no_events(sup: Any) -> None:
    """Bound, not candidate: no call event published, no metrics counted."""
    sup.events.publish = lambda event: None
    sup.metrics.observe_call = lambda server, outcome, seconds: None


PATCHES: dict[str, Callable[[Any], None]] = {
    "noaudit": _no_audit,
    "nojournal": _no_journal,
    "nostore": _no_store,
    "journalthread": _journal_in_a_thread,
    "oswrite": _os_write,
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
