"""Folding audit journals into SQLite: a live instance's closed segments, an instance's
whole journal at its end, and at start the journals of instances that died.

Folding is idempotent: every line carries a unique ``record`` id and the audit table
skips ids it holds, so a fold cut short (a crash, a full disk) is simply done again.
Lines are read in order, segment by segment; for each id the last line wins, so a
call's start line (outcome ``interrupted``) gives way to its row once that was written.
A line that does not parse (the torn last line of a killed writer) is skipped and
counted.

Which journals a starting instance folds: those of the dead instances it has claimed
(``claim_dead_instances``), and those whose instance is not live at all (it ended, but
could not fold its journal, e.g. on a full disk). Never a live instance's: its start
lines would become ``interrupted`` rows for calls that are still running.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs
import orjson

from actors.log_events import get_logger
from actors.transports.instances import DeadInstance, instance_is_live
from supervisor.store.database import Store
from supervisor.store.errors import StoreError
from supervisor.store.journal_files import SUFFIX, journal_dir
from supervisor.store.records import AuditRow

log = get_logger("supervisor.store.journal")

INTERRUPTED = "interrupted"
"""The outcome of a call's start line: the row it leaves if it never ends."""


_OPTIONAL = ("trace_id", "person", "replica", "cancelled_by")
"""Fields a line may lack, in ``AuditRow``'s order after the rest."""

_FIELDS: tuple[tuple[str, type], ...] = tuple(
    (field.name, {"float": float, "int": int}.get(str(field.type), str))
    for field in attrs.fields(AuditRow)
    if field.name not in _OPTIONAL
)
"""``AuditRow``'s fields every line has, in order, with the type each one must have
(``trace_id`` is written only for traced calls, ``person`` only when known, and lines
from before have neither)."""


def parse_line(line: bytes) -> AuditRow | None:
    """One journal line's row; None when it does not parse (a torn line)."""
    try:
        data = orjson.loads(line)
        values = [kind(data[name]) for name, kind in _FIELDS]
        for name in _OPTIONAL:
            value = data.get(name)
            values.append(value if isinstance(value, str) else None)
        return AuditRow(*values)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return None


def read_journal(paths: Iterable[Path]) -> tuple[dict[str, AuditRow], int]:
    """The rows of journal files by record id (the last line of an id wins), and how
    many lines were unreadable. A file that is gone is skipped."""
    rows: dict[str, AuditRow] = {}
    bad = 0
    for path in paths:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        for line in data.splitlines():
            row = parse_line(line)
            if row is None or row.record is None:
                bad += bool(line.strip())
                continue
            rows.pop(row.record, None)  # keep the order of the last lines
            rows[row.record] = row
    return rows, bad


def fold_journal(store: Store, paths: Sequence[Path], *, interrupted: bool) -> int:
    """Write the rows of ``paths`` to SQLite in one transaction; with ``interrupted``
    also the start lines of calls that never ended, as ``interrupted`` rows (only when
    no call of that journal can still end). Returns the rows offered (ones SQLite
    already holds are skipped). Raises StoreError or OSError."""
    rows, bad = read_journal(paths)
    chosen = [row for row in rows.values() if interrupted or row.outcome != INTERRUPTED]
    if bad:
        log.warning(
            "audit journal lines skipped: unreadable",
            extra={"fields": {"lines": bad, "files": ",".join(p.name for p in paths)}},
        )
    if chosen:
        store.add_audit(chosen)
    return len(chosen)


def journals(state_dir: Path) -> dict[str, list[Path]]:
    """Every journal in the state directory: instance id → its segments, in order."""
    found: dict[str, list[tuple[int, Path]]] = {}
    try:
        names = os.listdir(journal_dir(state_dir))
    except FileNotFoundError:
        return {}
    for name in names:
        if not name.endswith(SUFFIX):
            continue
        instance, _, index = name[: -len(SUFFIX)].rpartition(".")
        if instance and index.isdigit():
            found.setdefault(instance, []).append((int(index), journal_dir(state_dir) / name))
    return {instance: [path for _, path in sorted(segments)] for instance, segments in found.items()}


def _fold_and_delete(store: Store, instance: str, paths: list[Path]) -> bool:
    try:
        count = fold_journal(store, paths, interrupted=True)
    except (StoreError, OSError):
        log.error("audit journal of a dead instance not folded; the next start retries", exc_info=True)
        return False
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    log.info(
        "folded the audit journal of a dead instance", extra={"fields": {"instance": instance, "rows": count}}
    )
    return True


def recover_audit_journals(store: Store, state_dir: Path, dead: Sequence[DeadInstance]) -> list[DeadInstance]:
    """At start, inside ``claim_dead_instances``: fold the journals of the claimed
    ``dead`` instances and of instances that are gone without a lock, then delete them.

    Returns the claimed instances whose journals are folded (or who had none): call
    ``done()`` on those once every other recovery of theirs is done too. A journal
    that cannot be folded now (a full disk) stays, and so does its claim, for the next
    start.
    """
    found = journals(state_dir)
    recovered = []
    for instance in dead:
        paths = found.pop(instance.id, [])
        if not paths or _fold_and_delete(store, instance.id, paths):
            recovered.append(instance)
    for instance_id, paths in found.items():
        if not instance_is_live(state_dir, instance_id):
            _fold_and_delete(store, instance_id, paths)
    return recovered
