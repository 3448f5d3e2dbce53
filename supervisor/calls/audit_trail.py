"""Where a call's audit row goes: this instance's journal at once, then SQLite.

Every call attempt leaves one row (README: one audit row per call attempt). A call
that may wait journals the row it would leave if the supervisor died meanwhile
(``started``: outcome ``interrupted``); its end journals the real row with one
``write()`` (durable against a kill of this process from then on) and queues it for
the store actor, which writes it to SQLite in a batch (``supervisor.store``).
"""

from __future__ import annotations

import attrs

from supervisor.store import AddAudit, AuditRow, StoreActor
from supervisor.store.journal import AuditJournal

FULL_QUEUE = "the store's queue was full (the database is far behind)"


@attrs.frozen(slots=True, eq=False)
class AuditTrail:
    """The journal and the store actor, as a call sees them."""

    journal: AuditJournal
    store: StoreActor
    replica: str | None = None
    """The replica its rows name (None: a single process, whose rows name none)."""

    def _stamped(self, row: AuditRow) -> AuditRow:
        return row if self.replica is None else attrs.evolve(row, replica=self.replica)

    def new_id(self) -> str:
        """A fresh record id (a row's id in the journal and in SQLite)."""
        return self.journal.new_id()

    def started(self, row: AuditRow) -> None:
        """A call goes out (or waits for an approval): journal the row it leaves if the
        supervisor dies before it ends (outcome ``interrupted``; same ``record`` id)."""
        self.journal.started(self._stamped(row))

    async def finished(self, row: AuditRow) -> None:
        """One call's row: journaled at once, then queued for SQLite; when the store is
        far behind, the call waits for room."""
        row = self._stamped(row)
        receipt = self.journal.finished(row)
        if not await self.store.put(AddAudit(row, receipt)) and receipt is not None:
            receipt.settle(False, FULL_QUEUE)

    def finished_now(self, row: AuditRow) -> None:
        """``finished`` without waiting (for a call being cancelled)."""
        row = self._stamped(row)
        receipt = self.journal.finished(row)
        if not self.store.submit(AddAudit(row, receipt)) and receipt is not None:
            receipt.settle(False, FULL_QUEUE)
