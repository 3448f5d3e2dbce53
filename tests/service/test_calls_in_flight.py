"""Every call that may wait is listed under a server-assigned id while it is in flight,
and cancelling it by that id tells the real server, answers ``cancelled`` and leaves
an audit row that names who cancelled it; the server's latency ring counts it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio
import trio.testing

from supervisor import Supervisor
from tests.service.test_embedding import config_of, mini_spec


async def test_a_call_is_listed_by_its_id_and_cancelled_by_it(tmp_path: Path) -> None:
    python = sys.executable
    async with Supervisor.open(config_of(mini_spec("mini", python=python)), state_dir=tmp_path) as sup:
        in_flight = sup.calls.in_flight
        async with sup.session() as session:
            turn = await session.begin_turn()
            assert (await turn.call("mini_echo", {"text": "hi"})).ok  # ended: no longer listed
            result: list[Any] = []

            async def slow() -> None:
                result.append(await turn.call("mini_sleep", {"seconds": 30}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow)
                await trio.testing.wait_all_tasks_blocked()  # it waits for its server
                [call] = in_flight.listed("default")
                assert (call.server, call.tool, call.tenant, call.session) == (
                    "mini",
                    "mini_sleep",
                    "default",
                    session.id,
                )
                assert call.id == "c2"  # the echo was c1: ids are never reused
                assert in_flight.listed("another-tenant") == []
                assert not in_flight.cancel(call.id, "another-tenant", "tenant another-tenant")
                assert in_flight.cancel(call.id, None, "operator default")
            assert result[0].error.code == "cancelled"
            assert len(in_flight) == 0 and not in_flight.cancel(call.id, None, "operator default")
            assert (await turn.call("mini_echo", {"text": "again"})).ok  # the session goes on
        await sup.store.flush()
        rows = await sup.store.read(lambda s: s.audit_rows(limit=10))
        assert [(r.tool, r.outcome, r.cancelled_by) for r in reversed(rows)] == [
            ("mini_echo", "ok", None),
            ("mini_sleep", "cancelled", "operator default"),
            ("mini_echo", "ok", None),
        ]
        counted = sum(bucket.count for bucket in sup.calls.latency.buckets("mini"))
        assert counted == 3
