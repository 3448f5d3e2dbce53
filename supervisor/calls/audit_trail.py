"""Where a call's audit row goes: this instance's journal, at once.

Every call attempt leaves one row (README: one audit row per call attempt). A call
that may wait journals the row it would leave if the supervisor died meanwhile
(``started``: outcome ``interrupted``); its end journals the real row with one
``write()`` (durable against a kill of this process from then on). The folder, a
process of its own, inserts the journal's rows into the store behind the answers
(``supervisor.store.folding``), so the call path never waits for the database nor
shares the GIL with its inserts.
"""

from __future__ import annotations

import attrs

from supervisor.store import AuditRow
from supervisor.store.journal import AuditJournal, LineFields, encode_fields


@attrs.frozen(slots=True, eq=False)
class AuditTrail:
    """The journal, as a call sees it."""

    journal: AuditJournal
    replica: str | None = None
    """The replica its rows name (None: a single process, whose rows name none)."""

    def new_id(self) -> str:
        """A fresh record id (a row's id in the journal and in the store)."""
        return self.journal.new_id()

    def started(self, row: AuditRow) -> None:
        """A call goes out (or waits for an approval): journal the row it leaves if the
        supervisor dies before it ends (outcome ``interrupted``; same ``record`` id)."""
        # The replica test inline, not a method: two function calls less per call.
        self.journal.started(row if self.replica is None else attrs.evolve(row, replica=self.replica))

    def finished(self, row: AuditRow) -> None:
        """One call's row, journaled at once (no waiting, also for a call being cancelled)."""
        self.journal.finished(row if self.replica is None else attrs.evolve(row, replica=self.replica))

    def started_fields(self, fields: LineFields) -> None:
        """``started`` for a call's line fields (``journal_lines.line_fields``, the
        replica already in them): the call path builds no ``AuditRow``."""
        record = fields["record"]
        assert record is not None
        self.journal.started_line(record, encode_fields(fields))

    def finished_fields(self, fields: LineFields) -> None:
        """``finished`` for a call's line fields."""
        self.journal.finished_line(fields["record"], encode_fields(fields))
