"""New-era tenant states shared by replicas, on both backends: rows only grow, so two
writers keep each other's; they go when the key was unused for the idle time."""

from __future__ import annotations

import time
from collections.abc import Callable

from supervisor.store import Store


def test_two_writers_keep_each_others_rows_in_their_order(reopen: Callable[[], Store]) -> None:
    with reopen() as one, reopen() as two:
        assert one.add_tenant_state("t", None, [("a_x", 0), ("a_y", 1)], []) == 2
        # the other replica activated a_z, and knew a_x under another number: the first stays
        assert two.add_tenant_state("t", None, [("a_x", 5), ("a_z", 1)], [("mcp:a:x", "fp", "allow")]) == 2
        assert two.add_tenant_state("t", None, [("a_x", 0)], [("mcp:a:x", "fp", "deny")]) == 0
        state = one.tenant_state("t", None)
        assert state.activated == ("a_x", "a_y", "a_z")
        assert state.approvals == (("mcp:a:x", "fp", "allow"),)
        # each person of a tenant has their own; '' is the tenant's own
        assert one.tenant_state("t", "ada").activated == ()
        one.add_tenant_state("t", "ada", [("a_q", 0)], [])
        assert two.tenant_state("t", "ada").activated == ("a_q",)
        assert two.tenant_state("t", None).activated == ("a_x", "a_y", "a_z")


def test_rows_go_only_once_nobody_used_the_key_for_the_idle_time(store: Store) -> None:
    store.add_tenant_state("t", None, [("a_x", 0)], [("p", "f", "allow")])
    assert not store.end_tenant_state("t", None, idle_s=5.0)  # used just now
    assert store.tenant_state("t", None).activated == ("a_x",)
    time.sleep(0.25)
    store.use_tenant_state("t", None)  # another replica still uses it
    assert not store.end_tenant_state("t", None, idle_s=0.2)
    time.sleep(0.25)
    assert store.end_tenant_state("t", None, idle_s=0.2)
    assert store.tenant_state("t", None) == store.tenant_state("t", "nobody")
    assert store.tenant_state("t", None).activated == () and store.tenant_state("t", None).approvals == ()
    assert not store.end_tenant_state("t", None, idle_s=0.2)  # nothing left to end
