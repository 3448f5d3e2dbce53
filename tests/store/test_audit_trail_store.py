"""The store's side of the audit trail: an export is a time range (of one person),
oldest first; a purge is by age or by person, never both or neither. On both backends
(the ``store`` fixture, conftest.py)."""

from __future__ import annotations

import pytest

from supervisor.store import AuditRow, Store


def made(n: int, person: str | None) -> AuditRow:
    return AuditRow(
        1000.0 + n, "t", "s", f"tool_{n}", "srv", "allow", "ok", 1, "0" * 64, 2, 3, f"r{n}", None, person
    )


def test_between_is_a_half_open_range_oldest_first_and_a_person_narrows_it(store: Store) -> None:
    store.add_audit([made(3, "ada"), made(1, "ada"), made(2, "bob"), made(4, None)])
    assert [r.tool for r in store.audit_between(1001.0, 1004.0)] == ["tool_1", "tool_2", "tool_3"]
    assert [r.tool for r in store.audit_between(0, 2000, "ada")] == ["tool_1", "tool_3"]
    assert store.audit_between(1005.0, 2000) == []


def test_purge_by_age_or_by_person(store: Store) -> None:
    store.add_audit([made(1, "ada"), made(2, "bob"), made(3, "ada"), made(4, None)])
    assert store.purge_audit(before=1002.0) == 1
    assert store.purge_audit(person="ada") == 1
    assert store.purge_audit(person="nobody") == 0
    assert [(r.tool, r.person) for r in store.audit_between(0, 2000)] == [
        ("tool_2", "bob"),
        ("tool_4", None),
    ]
    for wrong in ({}, {"before": 1.0, "person": "bob"}):
        with pytest.raises(ValueError, match="exactly one of before= and person="):
            store.purge_audit(**wrong)  # type: ignore[arg-type]
