"""The refresh lease of an OAuth record (store migration 11, ``oauth_rows.py``), on both
backends: one holder at a time, per (server, url, person); released only by its
holder; an expired one is taken over, naming whom from; and ``StoreVault.renewing``
waits for another holder, then gives the record as that holder stored it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

from actors.auth.vault import LeasingVault, MemoryVault
from supervisor.store import Store
from supervisor.store.vault import StoreVault

URL = "https://docs.example/mcp"


def test_one_holder_at_a_time_per_record_until_released_or_expired(store: Store) -> None:
    assert store.take_oauth_lease("docs", URL, "p1", 30) == (True, None)
    assert store.take_oauth_lease("docs", URL, "p2", 30) == (False, None)
    assert store.take_oauth_lease("docs", URL, "p2", 30, person="ada") == (True, None)  # ada's own
    assert store.take_oauth_lease("docs", "https://other.example/mcp", "p2", 30) == (True, None)
    store.release_oauth_lease("docs", URL, "p2")  # not p2's: stays p1's
    assert store.take_oauth_lease("docs", URL, "p3", 30) == (False, None)
    store.release_oauth_lease("docs", URL, "p1")
    assert store.take_oauth_lease("docs", URL, "p3", 0.05) == (True, None)


async def test_an_expired_lease_is_taken_over_naming_its_holder(store: Store) -> None:
    assert store.take_oauth_lease("docs", URL, "dead", 0.1) == (True, None)
    assert store.take_oauth_lease("docs", URL, "p2", 30) == (False, None)
    await trio.sleep(0.15)
    assert store.take_oauth_lease("docs", URL, "p2", 30) == (True, "dead")


async def test_renewing_waits_for_the_holder_and_reads_what_it_stored(reopen: Callable[[], Store]) -> None:
    with reopen() as first, reopen() as second:
        one, two = StoreVault(first), StoreVault(second)
        assert isinstance(one, LeasingVault)
        seen: list[object] = []
        held = trio.Event()

        async def holder() -> None:
            async with one.renewing("docs", URL, lease_s=30) as stored:
                assert stored is None
                held.set()
                await trio.sleep(0.2)
                assert seen == []  # the other waits while the lease is held
                await one.save("docs", URL, {"t": "fresh"})

        async def waiter() -> None:
            await held.wait()
            async with two.renewing("docs", URL, lease_s=30) as stored:
                seen.append(stored)

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(holder)
                nursery.start_soon(waiter)
        assert seen == [{"t": "fresh"}]
        assert first.take_oauth_lease("docs", URL, "p9", 30) == (True, None)  # both released
        with pytest.raises(ValueError, match="lease_s > 0"):
            async with one.renewing("docs", URL, lease_s=0):
                pass


async def test_the_memory_vault_leases_in_process() -> None:
    vault = MemoryVault()
    assert isinstance(vault, LeasingVault)
    order: list[str] = []

    async def renew(name: str) -> None:
        async with vault.renewing("docs", URL, lease_s=1) as stored:
            order.append(f"{name}:{stored}")
            if stored is None:
                await vault.save("docs", URL, {"by": name})
            await trio.sleep(0.01)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(renew, "a")
        nursery.start_soon(renew, "b")
    first, second = (entry.split(":", 1) for entry in order)  # trio starts them in either order
    assert first[1] == "None" and second[1] == str({"by": first[0]}) and first[0] != second[0]
