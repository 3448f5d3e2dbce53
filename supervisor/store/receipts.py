"""How the store actor tells the audit journal which rows SQLite holds.

Each audit row goes to SQLite with a receipt from the journal, and the store actor
settles it once: committed, or not and why. A journal segment is deleted once every
row in it is settled committed; a row that was not is folded in from the file first,
and counted as waiting until then (``supervisor.store.journal``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import attrs


class Receipt(Protocol):
    """Told once whether the row it came with was committed, and if not why (the
    journal's ``Segment``, or its ``InMemory``)."""

    def settle(self, written: bool, why: str = "") -> None: ...


Wake = Callable[[str | None], None]
"""Tells the journal's task to look again (with why SQLite refused a row, if it did)."""


@attrs.define(eq=False)
class Segment:
    """One journal file, and how many of its rows the store actor has still to settle."""

    index: int
    path: Path
    wake: Wake = attrs.field(repr=False)
    unsettled: int = 0
    missed: int = 0  # rows SQLite refused: they wait here until the file is folded in
    refold: bool = False  # SQLite may miss rows of it: fold the file before deleting it
    closed: bool = False

    def settle(self, written: bool, why: str = "") -> None:
        """The store actor is done with one row of this segment (``StoreActor`` receipt):
        committed, or not (``why``)."""
        self.unsettled -= 1
        if not written:
            self.missed += 1
            self.refold = True
            self.wake(why)
        elif self.closed and not self.unsettled:
            self.wake(None)


@attrs.define(eq=False)
class InMemory:
    """The receipt of rows that wait in memory (the disk refused their lines): they are
    folded in from the segment their lines reach, whatever SQLite says; this counts the
    ones SQLite refused meanwhile, which wait with them."""

    wake: Wake = attrs.field(repr=False)
    missed: int = 0

    def settle(self, written: bool, why: str = "") -> None:
        if not written:
            self.missed += 1
            self.wake(why)
