"""The audit search of ``GET /v1/audit`` on both backends: filters, newest first, and a
cursor that pages on without repeating or skipping a row, also among equal times and
rows written between pages."""

from __future__ import annotations

import pytest

from supervisor.store import AuditRow, Store
from supervisor.store.audit_search import AuditQuery


def _row(n: int, at: float, tenant: str = "t1", server: str = "time", outcome: str = "ok") -> AuditRow:
    by = "operator default" if outcome == "cancelled" else None
    return AuditRow(at, tenant, "s1", f"{server}_tool", server, "allow", outcome, n, "ab" * 32, 2, 0,
                    f"r-{n}", None, f"p{n % 2}", None, by)  # fmt: skip


def _ns(rows: tuple[AuditRow, ...]) -> list[int]:
    return [row.duration_ms for row in rows]


def test_pages_go_newest_first_through_equal_times_and_new_rows(store: Store) -> None:
    store.add_audit([_row(n, 100.0 + n // 3) for n in range(10)])  # three rows share each time
    first = store.search_audit(AuditQuery(limit=4))
    assert _ns(first.rows) == [9, 8, 7, 6] and first.cursor is not None
    store.add_audit([_row(50, 200.0)])  # newer than the cursor: the next page does not see it
    second = store.search_audit(AuditQuery(after=first.cursor, limit=4))
    assert _ns(second.rows) == [5, 4, 3, 2] and second.cursor is not None
    last = store.search_audit(AuditQuery(after=second.cursor, limit=4))
    assert _ns(last.rows) == [1, 0] and last.cursor is None


def test_filters_combine(store: Store) -> None:
    store.add_audit([
        _row(1, 10.0), _row(2, 20.0, tenant="t2"), _row(3, 30.0, server="fs"),
        _row(4, 40.0, outcome="cancelled"), _row(5, 50.0),
    ])  # fmt: skip
    assert _ns(store.search_audit(AuditQuery(tenant="t1")).rows) == [5, 4, 3, 1]
    assert _ns(store.search_audit(AuditQuery(server="fs")).rows) == [3]
    assert _ns(store.search_audit(AuditQuery(tool="time_tool", tenant="t1")).rows) == [5, 4, 1]
    assert _ns(store.search_audit(AuditQuery(since=20.0, until=50.0)).rows) == [4, 3, 2]
    assert _ns(store.search_audit(AuditQuery(person="p1")).rows) == [5, 3, 1]
    cancelled = store.search_audit(AuditQuery(outcome="cancelled")).rows
    assert _ns(cancelled) == [4] and cancelled[0].cancelled_by == "operator default"
    assert store.search_audit(AuditQuery(tenant="nobody")).rows == ()


@pytest.mark.parametrize("limit", [0, 501])
def test_a_page_outside_its_bounds_is_refused(store: Store, limit: int) -> None:
    with pytest.raises(ValueError, match="between 1 and 500"):
        store.search_audit(AuditQuery(limit=limit))
