"""Roles and tenants of the admin API, through the real Hypercorn-served app.

Request ids are per tenant: two tenants may use one id at the same time, and a
tenant learns nothing (no 409, no cancel) about the ids of another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from supervisor.requests import RequestRegistry
from tests.test_admin_support import ALICE, BOB, TOKENS, admin_running, config_of, mini_spec, until


def test_request_ids_are_scoped_per_tenant() -> None:
    registry = RequestRegistry()
    alice = registry.open("r-1", "alice", "mini_sleep")
    bob = registry.open("r-1", "bob", "mini_sleep")
    assert len(registry) == 2
    assert registry.cancel("r-1", "bob") and bob.cancelled and not alice.cancelled
    registry.close("r-1", "bob")
    assert not registry.cancel("r-1", "bob")
    assert registry.cancel("r-1", None) and alice.cancelled  # None: every tenant's
    registry.close("r-1", "alice")
    assert len(registry) == 0


async def test_two_tenants_may_use_one_request_id_at_once(tmp_path: Path) -> None:
    calls_log = tmp_path / "calls.log"
    async with admin_running(config_of(mini_spec("mini", "--calls-log", str(calls_log)), tokens=TOKENS),
                             tmp_path / "state") as api:  # fmt: skip
        alice, bob = api.http(ALICE), api.http(BOB)
        with trio.fail_after(20):
            sid, bob_sid = await alice.session(), await bob.session()
            tid, bob_tid = (await alice.turn(sid))["turn_id"], (await bob.turn(bob_sid))["turn_id"]
            slow: list[Any] = []

            async def alice_sleeps() -> None:
                slow.append(await alice.call(sid, tid, "mini_sleep", {"seconds": 30}, request_id="same-1"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(alice_sleeps)
                await until(calls_log.exists)  # Alice's call is at the server: in flight
                # Bob uses the same id: no 409 naming Alice's request, just his answer.
                echoed = await bob.call(bob_sid, bob_tid, "mini_echo", {"text": "b"}, request_id="same-1")
                assert echoed.status == 200 and echoed.json()["ok"] is True, echoed
                assert echoed.headers["x-request-id"] == "same-1"
                # Bob's cancel of that id reaches no call of Alice's.
                assert (await bob.request("POST", "/v1/requests/same-1/cancel")).status == 404
                assert not slow
                # Alice reusing her own id in flight is still a conflict.
                again = await alice.call(sid, tid, "mini_echo", {"text": "a"}, request_id="same-1")
                assert again.status == 409 and again.json()["error"]["code"] == "conflict"
                assert (await alice.request("POST", "/v1/requests/same-1/cancel")).status == 202
            assert slow[0].json()["error"]["code"] == "cancelled"
        assert len(api.sup.requests) == 0
