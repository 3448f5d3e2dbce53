"""Calls in flight by id: numbers on the call path, ``c<number>`` only where listed or named."""

from __future__ import annotations

from supervisor.calls.in_flight import CallsInFlight


def test_ids_are_made_when_listed_and_a_call_is_found_only_by_its_own_spelling() -> None:
    calls = CallsInFlight()
    first = calls.open(10.0, "alice", "s1", "ann", "notes", "add")
    second = calls.open(11.0, "bob", "s2", "ben", "notes", "add")
    assert [c.id for c in calls.listed(None)] == ["c1", "c2"] and first.started == 10.0
    assert [c.id for c in calls.listed("bob")] == ["c2"]
    for wrong in ("c01", "c", "1", "x1", "c1 ", "c²", "c٣", "c-1", ""):
        assert not calls.cancel(wrong, None, "ops"), wrong
    assert not calls.cancel("c2", "alice", "alice")  # another tenant's call is none of hers
    assert calls.cancel("c2", None, "ops") and second.cancelled_by == "ops"
    calls.close(first)
    assert [c.id for c in calls.listed(None)] == ["c2"] and len(calls) == 1
    assert not calls.cancel("c1", None, "ops")  # ended: gone


def test_numbers_are_never_reused_while_the_process_runs() -> None:
    calls = CallsInFlight()
    seen = set()
    for _ in range(3):
        call = calls.open(0.0, "t", "s", "p", "srv", "tool")
        seen.add(call.id)
        calls.close(call)
    assert seen == {"c1", "c2", "c3"}
