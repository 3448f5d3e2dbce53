"""What the database refused that no journal holds, said as it is.

Audit rows the journal holds never come here (the folder inserts them, and says
how many wait, ``supervisor.store.folding``). What no journal holds is lost:
remembered approvals, pins, tool lists, eras, and audit rows given to the store actor
directly. ``Unsaved`` counts those by kind and
says them in one line at most every ``REPORT_EVERY_S``, so a full disk is a few lines,
not one per batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.log_events import get_logger
from supervisor.store.errors import database_failed, failure_text
from supervisor.store.messages import AddAudit, StoreMessage

log = get_logger("supervisor.store")

REPORT_EVERY_S = 10.0


def why_failed(error: BaseException | None) -> str:
    """Why a write failed, in a few words."""
    return "the store stopped before writing it" if error is None else failure_text(error)


class Unsaved:
    """Writes no journal holds that the database refused, told in one line at most every
    ``REPORT_EVERY_S``: the count by kind since the last line, and why; audit rows
    (no journal holds those that come here) are counted ``lost`` too."""

    def __init__(self) -> None:
        self._kinds: dict[str, int] = {}
        self._error: BaseException | None = None
        self._told_at: float | None = None

    def add(self, failed: Sequence[StoreMessage], error: BaseException | None) -> None:
        for message in failed:
            self._kinds[message.kind] = self._kinds.get(message.kind, 0) + 1
            self._error = error

    def report(self, now: float, *, final: bool = False) -> None:
        """Log what was not saved, if anything, unless a line went out within
        ``REPORT_EVERY_S`` (``final``: the actor stops, say it now)."""
        if not self._kinds:
            return
        if not final and self._told_at is not None and now - self._told_at < REPORT_EVERY_S:
            return
        kinds, error = self._kinds, self._error
        self._kinds, self._error, self._told_at = {}, None, now
        fields: dict[str, object] = {"not_saved": sum(kinds.values())}
        if AddAudit.kind in kinds:
            fields["lost"] = kinds[AddAudit.kind]
        fields["kinds"] = ", ".join(f"{kind} {count}" for kind, count in kinds.items())
        fields["error"] = why_failed(error)
        # A full or locked database is a condition, named by its error; anything else
        # is a bug, whose traceback is wanted.
        trace = error if error is not None and not database_failed(error) else None
        log.error("store write failed", exc_info=trace, extra={"fields": fields})
