"""What a console inspects, through the real Hypercorn-served app with tokens: the calls
in flight by their server-assigned ids (a tenant's own, the operator's of every tenant),
a cancel by that id (the operator may cancel any tenant's call, a tenant only its own;
the audit row says who), the audit search (a tenant sees only its own rows; naming
another tenant is refused), and a server's latency ring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from supervisor.settings.model import Role, TokenGrant
from tests.support.admin import ALICE, BOB, admin_running, config_of, conforms, mini_spec, until, wait_for

OPS = "ops-token-0123456789abc"
TOKENS: dict[str, TokenGrant | str] = {OPS: TokenGrant("ops", Role.OPERATOR), ALICE: "alice", BOB: "bob"}


async def test_calls_in_flight_their_cancel_the_audit_search_and_latency(tmp_path: Path) -> None:
    calls_log = tmp_path / "calls.log"
    config = config_of(
        mini_spec("mini", "--calls-log", str(calls_log)), mini_spec("wild", trusted=False), tokens=TOKENS
    )
    async with admin_running(config, tmp_path / "state") as api:
        alice, bob, ops = api.http(ALICE), api.http(BOB), api.http(OPS)
        with trio.fail_after(25):
            sid, bob_sid = await alice.session(), await bob.session()
            tid, bob_tid = (await alice.turn(sid))["turn_id"], (await bob.turn(bob_sid))["turn_id"]
            assert (await bob.call(bob_sid, bob_tid, "mini_echo", {"text": "b"})).json()["ok"]
            slow: list[Any] = []

            async def alice_sleeps() -> None:
                slow.append(await alice.call(sid, tid, "mini_sleep", {"seconds": 30}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(alice_sleeps)
                await until(lambda: "sleep" in calls_log.read_text())  # at the server: in flight
                listed = await ops.request("GET", "/v1/calls")
                conforms("list_calls", listed)
                [call] = listed.json()["calls"]
                shown = [call[k] for k in ("server", "tool", "tenant", "session", "person")]
                assert shown == ["mini", "mini_sleep", "alice", sid, "alice"]
                assert call["age_s"] >= 0
                assert [c["call_id"] for c in (await alice.request("GET", "/v1/calls")).json()["calls"]] == [
                    call["call_id"]
                ]
                assert (await bob.request("GET", "/v1/calls")).json() == {"calls": []}
                cancel = f"/v1/calls/{call['call_id']}/cancel"
                refused = await bob.request("POST", cancel)  # another tenant's call: as if absent
                assert refused.status == 404 and refused.json()["error"]["code"] == "not_found"
                assert not slow
                cancelled = await ops.request("POST", cancel)  # the operator may cancel any tenant's
                conforms("cancel_call", cancelled)
                assert cancelled.json() == {"call_id": call["call_id"], "status": "cancelling"}
            assert slow[0].json()["error"]["code"] == "cancelled"
            assert (await ops.request("POST", cancel)).status == 404  # ended: gone
            assert (await alice.call(sid, tid, "mini_echo", {"text": "a"})).json()["ok"]

            asked: list[Any] = []  # a call that waits for an approval is cancelled by its id too

            async def alice_asks() -> None:
                asked.append(await alice.call(sid, tid, "wild_add_tool", {"name": "x"}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(alice_asks)
                await wait_for(ops, "/v1/approvals", lambda d: len(d["approvals"]) == 1)
                [waiting] = (await ops.request("GET", "/v1/calls")).json()["calls"]
                assert waiting["tool"] == "wild_add_tool"
                assert (await alice.request("POST", f"/v1/calls/{waiting['call_id']}/cancel")).status == 202
            error = asked[0].json()["error"]
            assert error["code"] == "cancelled" and "cancelled by tenant alice" in error["message"]
            assert (await ops.request("GET", "/v1/approvals")).json() == {"approvals": []}

            await api.sup.store.flush()
            everyone = await ops.request("GET", "/v1/audit")
            conforms("search_audit", everyone)
            rows = everyone.json()["rows"]
            assert [(r["tenant"], r["tool"], r["outcome"]) for r in rows] == [
                ("alice", "wild_add_tool", "cancelled"),
                ("alice", "mini_echo", "ok"),
                ("alice", "mini_sleep", "cancelled"),
                ("bob", "mini_echo", "ok"),
            ]
            assert [r["cancelled_by"] for r in rows[:3]] == ["tenant alice", None, "operator ops"]
            assert len(rows[1]["args_sha256"]) == 64 and rows[1]["duration_ms"] >= 0
            assert rows[1]["args_bytes"] == len(b'{"text":"a"}') and rows[1]["result_bytes"] > 0
            # a tenant sees its own rows only, and may not name another tenant
            assert [r["tenant"] for r in (await bob.request("GET", "/v1/audit")).json()["rows"]] == ["bob"]
            assert [
                r["tenant"] for r in (await bob.request("GET", "/v1/audit?tenant=bob")).json()["rows"]
            ] == ["bob"]
            named = await bob.request("GET", "/v1/audit?tenant=alice")
            conforms("search_audit", named)
            assert named.status == 400 and "drop tenant=" in named.json()["error"]["message"]
            # the operator filters, and pages on with the cursor
            first = (await ops.request("GET", "/v1/audit?tenant=alice&limit=1")).json()
            assert [r["tool"] for r in first["rows"]] == ["wild_add_tool"] and first["cursor"]
            rest = (
                await ops.request("GET", f"/v1/audit?tenant=alice&limit=5&cursor={first['cursor']}")
            ).json()
            assert [r["tool"] for r in rest["rows"]] == ["mini_echo", "mini_sleep"] and rest["cursor"] is None
            cancelled_rows = (await ops.request("GET", "/v1/audit?outcome=cancelled&server=mini")).json()[
                "rows"
            ]
            assert [r["tool"] for r in cancelled_rows] == ["mini_sleep"]
            for bad in ("limit=0", "limit=501", "since=yesterday", "cursor=nope", "until=nan"):
                reply = await ops.request("GET", f"/v1/audit?{bad}")
                assert reply.status == 400 and bad.split("=")[0] in reply.json()["error"]["message"], bad

            latency = await alice.request("GET", "/v1/servers/mini/latency")
            conforms("server_latency", latency)
            series = latency.json()
            assert series["server"] == "mini" and series["bucket_s"] == 10 and len(series["buckets"]) == 90
            assert (
                sum(b["count"] for b in series["buckets"]) == 3
            )  # bob's echo, the cancelled sleep, the echo
            assert (await alice.request("GET", "/v1/servers/nope/latency")).status == 404
