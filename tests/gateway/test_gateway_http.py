"""``/mcp`` over the real admin server (Hypercorn on a loopback port) fronting
mini_server.py: sessions, JSON and SSE answers, resumption, and the HTTP rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.spec import Scope, Start
from supervisor import Supervisor
from supervisor.gateway import http_front
from supervisor.gateway.results import INVALID_REQUEST, PARSE_ERROR
from supervisor.server import serve
from supervisor.server import serving as admin_server
from supervisor.settings.model import GatewaySettings
from tests.gateway.test_gateway_stateless import meta
from tests.support.admin import ALICE, BOB, TOKENS, Http, admin_running, config_of, mini_spec, until
from tests.support.gateway_http import (
    ACCEPT_BOTH,
    McpHttp,
    events_until,
    initialize,
    parse_sse,
    request,
    rest_raw,
)


async def test_a_session_lists_calls_streams_progress_and_ends_with_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        mcp = McpHttp(api.http())
        with trio.fail_after(15):
            opened = await mcp.open()
            result = opened.json()["result"]
            assert result["protocolVersion"] == "2025-11-25"
            assert result["serverInfo"]["name"] == "mcp-supervisor"
            listed = await mcp.call(1, "tools/list")
            assert "mini_echo" in [tool["name"] for tool in listed["result"]["tools"]]
            echoed = await mcp.call(2, "tools/call", {"name": "mini_echo", "arguments": {"text": "hi"}})
            assert echoed["result"] == {"content": [{"type": "text", "text": "hi"}], "isError": False}

            params = {
                "name": "mini_progress",
                "arguments": {"steps": 2, "interval": 0.01},
                "_meta": {"progressToken": "p"},
            }
            streamed = await mcp.post(request(3, "tools/call", params))
            assert streamed.status == 200 and streamed.headers["content-type"].startswith("text/event-stream")
            events = parse_sse(streamed.body)
            assert events[0].data is None and events[0].retry is not None and events[0].id is not None
            assert [e.data["method"] for e in events[1:-1]] == ["notifications/progress"] * 2
            assert [e.data["params"]["progressToken"] for e in events[1:-1]] == ["p", "p"]
            assert events[-1].data["id"] == 3 and events[-1].data["result"]["isError"] is False
            ids = [e.id for e in events]
            assert len(set(ids)) == len(ids)

            # A call answered within JSON_WINDOW_S with nothing before it is JSON (done:
            # nothing to resume); a longer one is streamed, a priming event to resume
            # from first. A listing with nothing related before its response is JSON.
            monkeypatch.setattr(http_front, "JSON_WINDOW_S", 10.0)  # an echo answers well within
            quick = await mcp.post(
                request(5, "tools/call", {"name": "mini_echo", "arguments": {"text": "q"}})
            )
            assert quick.headers["content-type"] == "application/json" and quick.json()["id"] == 5
            monkeypatch.setattr(http_front, "JSON_WINDOW_S", 0.05)  # a 0.5 s sleep outlasts it
            slow_call = {"name": "mini_sleep", "arguments": {"seconds": 0.5}}
            slow = await mcp.post(request(7, "tools/call", slow_call))
            assert slow.headers["content-type"].startswith("text/event-stream")
            primed, answered = parse_sse(slow.body)
            assert primed.data is None and primed.retry == 1000 and answered.data["id"] == 7
            listing = await mcp.post(request(6, "tools/list"))
            assert listing.headers["content-type"] == "application/json" and listing.json()["id"] == 6

            deleted = await mcp.http.request("DELETE", "/mcp", headers=mcp.headers())
            assert deleted.status == 204
            gone = await mcp.post(request(4, "tools/list"))
            assert gone.status == 404
            assert "initialize" in gone.json()["error"]["message"]


async def test_http_rules_each_refusal_says_why_and_the_session_lives_on(tmp_path: Path) -> None:
    config = attrs.evolve(config_of(mini_spec("mini")), gateway=GatewaySettings(max_message_bytes=64 * 1024))
    async with admin_running(config, tmp_path) as api:
        mcp = McpHttp(api.http())
        with trio.fail_after(15):
            # Before a session: no id → 400; a batch → invalid_request; the new era → not served.
            early = await mcp.post(request(1, "tools/list"))
            assert early.status == 400 and "Mcp-Session-Id is missing" in early.json()["error"]["message"]
            await mcp.open()
            batch = await mcp.post([request(2, "tools/list"), request(3, "ping")])
            assert batch.status == 400 and batch.json()["error"]["code"] == INVALID_REQUEST
            assert "batches are not accepted" in batch.json()["error"]["message"]
            garbage = await mcp.http.request("POST", "/mcp", body=b"{nope", headers=mcp.headers())
            assert garbage.status == 400 and garbage.json()["error"]["code"] == PARSE_ERROR

            # A response or a notification alone → 202.
            note = await mcp.post(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}}
            )
            assert note.status == 202 and note.body == b""
            answer = await mcp.post({"jsonrpc": "2.0", "id": "s-41", "result": {}})
            assert answer.status == 202

            # The protocol version must be the negotiated one.
            wrong = await mcp.post(request(4, "ping"), {"MCP-Protocol-Version": "2025-06-18"})
            assert wrong.status == 400 and "2025-11-25" in wrong.json()["error"]["message"]
            assert wrong.json()["id"] == 4
            assumed = await mcp.post(request(4, "ping"), {"MCP-Protocol-Version": "2025-03-26"})
            assert assumed.status == 200  # the version a server assumes when none is said

            # Mcp-Method / Mcp-Name must repeat the body.
            call = request(5, "tools/call", {"name": "mini_echo", "arguments": {"text": "x"}})
            for headers, what in (
                ({"Mcp-Method": "tools/list"}, "Mcp-Method"),
                ({"Mcp-Method": "tools/call", "Mcp-Name": "mini_add"}, "Mcp-Name"),
            ):
                refused = await mcp.post(call, headers)
                assert refused.status == 400 and what in refused.json()["error"]["message"], refused
            named = {"Mcp-Method": "tools/call", "Mcp-Name": "mini_echo"}
            matching = await mcp.post(call, named, accept="application/json")
            assert matching.status == 200 and matching.json()["result"]["content"][0]["text"] == "x"

            # A message over gateway.max_message_bytes (above the admin API's own 1 MiB
            # too) gets its own error; the session lives on.
            for size in (100 * 1024, 2 * 1024 * 1024):
                big = request(6, "tools/call", {"name": "mini_echo", "arguments": {"text": "y" * size}})
                refused = await mcp.post(big)
                assert refused.status == 413, refused
                assert "gateway.max_message_bytes" in refused.json()["error"]["message"]
            alive = await mcp.call(7, "ping")
            assert alive == {"jsonrpc": "2.0", "id": 7, "result": {}}

            # A per-request-era message goes to the new era's handler: without its
            # MCP-Protocol-Version header it is refused, saying so.
            modern = request(8, "server/discover")
            unserved = await mcp.http.request(
                "POST", "/mcp", json=modern, headers={"Accept": "application/json"}
            )
            assert unserved.status == 400
            assert "MCP-Protocol-Version header is missing" in unserved.json()["error"]["message"]

            # GET /mcp without a session, or without Accept: text/event-stream.
            nameless = await mcp.http.request("GET", "/mcp", headers={"Accept": "text/event-stream"})
            assert nameless.status == 400 and "Mcp-Session-Id" in nameless.json()["error"]["message"]
            no_sse = await mcp.http.request("GET", "/mcp", headers=mcp.headers(accept="application/json"))
            assert no_sse.status == 406


@pytest.mark.parametrize(
    ("headers", "status", "why"),
    [
        ({"Origin": "null"}, 403, "Origin"),
        ({"Origin": "http://evil.example"}, 403, "Origin"),
        ({"Host": "evil.example"}, 403, "Host"),
    ],
)
async def test_mcp_has_the_admin_guard_as_json_rpc_errors(
    tmp_path: Path, headers: dict[str, str], status: int, why: str
) -> None:
    async with admin_running(config_of(), tmp_path) as api:
        with trio.fail_after(10):
            host = headers.pop("Host", None)
            reply = await api.http().request("POST", "/mcp", json=initialize(), headers=headers, host=host)
    assert reply.status == status
    body = reply.json()
    assert body["jsonrpc"] == "2.0" and why in body["error"]["message"]
    assert body["error"]["data"]["code"] == "forbidden"


async def test_a_401_carries_www_authenticate_and_sessions_are_per_tenant(tmp_path: Path) -> None:
    config = attrs.evolve(
        config_of(mini_spec("mini"), tokens=TOKENS), gateway=GatewaySettings(max_sessions_per_tenant=1)
    )
    async with admin_running(config, tmp_path) as api:
        with trio.fail_after(15):
            anonymous = await api.http().request("POST", "/mcp", json=initialize())
            assert anonymous.status == 401 and anonymous.headers["www-authenticate"] == "Bearer"
            assert "Authorization: Bearer" in anonymous.json()["error"]["message"]

            alice, bob = McpHttp(api.http(ALICE)), McpHttp(api.http(BOB))
            await alice.open()
            over = await McpHttp(api.http(ALICE)).post(initialize())
            assert over.status == 429 and "gateway.max_sessions_per_tenant" in over.json()["error"]["message"]
            await bob.open()  # bob's bound is his own
            # Bob cannot use, see or end Alice's session: it is unknown to him (404).
            bob.session_id, mine = alice.session_id, bob.session_id
            assert (await bob.post(request(1, "ping"))).status == 404
            assert (await bob.http.request("DELETE", "/mcp", headers=bob.headers())).status == 404
            bob.session_id = mine

            await alice.call(1, "tools/call", {"name": "mini_echo", "arguments": {"text": "a"}})
            listed = await api.http(ALICE).request("GET", "/v1/gateway/sessions")
            [item] = listed.json()["sessions"]
            assert item["tenant"] == "alice" and item["session_id"] == alice.session_id
            assert item["client"] == {"name": "raw-test", "version": "1"} and item["turns"] == 1
            assert item["era"] == "handshake" and item["protocol_version"] == "2025-11-25"
            assert "mini" in item["servers"] and item["in_flight"] == 0

            # The call's audit row is under the token's tenant.
            await api.sup.store.flush()
            rows = await api.sup.store.read(lambda s: s.audit_rows(limit=100))
            assert [(row.tenant, row.tool) for row in rows if row.tool == "mini_echo"] == [
                ("alice", "mini_echo")
            ]


async def test_a_dropped_post_stream_resumes_with_last_event_id(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        mcp = McpHttp(api.http())
        with trio.fail_after(15):
            await mcp.open()
            params = {
                "name": "mini_progress",
                "arguments": {"steps": 4, "interval": 0.2},
                "_meta": {"progressToken": 1},
            }
            async with mcp.http.stream(
                "POST", "/mcp", json=request(9, "tools/call", params), headers=mcp.headers()
            ) as s:
                seen = await events_until(s, lambda e: e.data is not None)
                assert seen[-1].data["method"] == "notifications/progress"
                last_id = seen[-1].id
            assert last_id is not None  # the client hung up here, mid-call
            headers = mcp.headers({"Last-Event-ID": last_id}, accept="text/event-stream")
            resumed = await mcp.http.request("GET", "/mcp", headers=headers)
            events = parse_sse(resumed.body)
            assert events[0].data is None  # priming
            messages = [e.data for e in events[1:]]
            assert messages[-1]["id"] == 9 and messages[-1]["result"]["isError"] is False
            steps = [m["params"]["progress"] for m in messages[:-1]]
            assert steps == sorted(steps) and 1 not in steps  # only what was missed
            unknown = await mcp.http.request(
                "GET", "/mcp", headers=mcp.headers({"Last-Event-ID": "77-1"}, accept="text/event-stream")
            )
            assert unknown.status == 400 and "Last-Event-ID" in unknown.json()["error"]["message"]


async def test_the_drain_answers_mcp_calls_in_flight_and_ends_the_get_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(admin_server, "CALL_GRACE_S", 0.5)
    calls_log = tmp_path / "calls.log"
    results: dict[str, Any] = {}
    async with Supervisor.open(
        config_of(mini_spec("mini", "--calls-log", str(calls_log))), state_dir=tmp_path
    ) as sup:
        with trio.fail_after(20):
            async with trio.open_nursery() as clients:
                async with trio.open_nursery() as admin:
                    mcp = McpHttp(Http(await admin.start(serve, sup, "127.0.0.1:0")))
                    await mcp.open()

                    async def call() -> None:
                        sleep = request(1, "tools/call", {"name": "mini_sleep", "arguments": {"seconds": 30}})
                        results["call"] = await mcp.post(sleep)

                    async def listen(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                        headers = mcp.headers(accept="text/event-stream")
                        async with mcp.http.stream("GET", "/mcp", headers=headers) as stream:
                            task_status.started()
                            results["get"] = await rest_raw(stream)

                    await clients.start(listen)
                    clients.start_soon(call)
                    await until(lambda: calls_log.exists() and bool(calls_log.read_text()))
                    started = trio.current_time()
                    admin.cancel_scope.cancel()
                drained_in = trio.current_time() - started
    assert drained_in < admin_server.GRACEFUL_TIMEOUT_S, drained_in
    answer = parse_sse(results["call"].body)[-1].data  # a call is streamed: priming, then its answer
    assert answer["id"] == 1 and "session ended" in answer["error"]["message"]
    assert parse_sse(results["get"])[0].retry is not None  # primed, then ended by the drain


async def test_delete_stops_the_sessions_own_servers(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini"), mini_spec("mine", scope=Scope.SESSION, start=Start.LAZY))
    async with admin_running(config, tmp_path) as api:
        mcp = McpHttp(api.http())
        with trio.fail_after(15):
            await mcp.open()
            listed = await mcp.call(1, "tools/list")
            assert "mine_echo" in [tool["name"] for tool in listed["result"]["tools"]]
            sid = mcp.session_id
            assert sid is not None and api.sup.router.cell.current.overlays.get(sid)
            [item] = (await mcp.http.request("GET", "/v1/gateway/sessions")).json()["sessions"]
            assert {"mini", "mine"} <= set(item["servers"])
            assert (await mcp.http.request("DELETE", "/mcp", headers=mcp.headers())).status == 204
            await until(lambda: not api.sup.router.cell.current.overlays.get(sid))


async def test_a_secret_a_backend_hands_back_is_masked_in_json_and_sse_answers_of_both_eras(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = "pl4nted-gateway-s3cret-9911"
    monkeypatch.setenv("PLANTED", planted)
    spec = attrs.evolve(mini_spec("mini"), env={"K": planted}, secrets=(planted,))
    async with admin_running(config_of(spec), tmp_path) as api:
        mcp = McpHttp(api.http())
        with trio.fail_after(15):
            await mcp.open()
            echo = {"name": "mini_echo", "arguments": {"text": f"key {planted}"}}
            as_json = await mcp.call(1, "tools/call", echo)
            monkeypatch.setattr(http_front, "JSON_WINDOW_S", 0.0)  # streamed at once
            as_sse = await mcp.post(request(2, "tools/call", echo))
            assert as_sse.headers["content-type"].startswith("text/event-stream")
            new_era = await mcp.http.request(
                "POST",
                "/mcp",
                json=request(3, "tools/call", {**echo, "_meta": meta()}),
                headers={
                    "Accept": ACCEPT_BOTH,
                    "MCP-Protocol-Version": "2026-07-28",
                    "Mcp-Method": "tools/call",
                    "Mcp-Name": "mini_echo",
                },
            )
    assert as_json["result"]["content"] == [{"type": "text", "text": "key ***"}]
    assert parse_sse(as_sse.body)[-1].data["result"]["content"] == [{"type": "text", "text": "key ***"}]
    assert b"key ***" in new_era.raw
    for raw in (as_sse.raw, new_era.raw):
        assert planted.encode() not in raw and planted[:12].encode() not in raw


async def test_list_changed_reaches_exactly_the_sessions_whose_view_changed(tmp_path: Path) -> None:
    """fastmcp#4161: a change of A's own server is told to A only; a shared server's
    change to both, each on its GET stream."""
    own = mini_spec("own", scope=Scope.SESSION, start=Start.LAZY)
    config = config_of(own, mini_spec("shared"))
    async with admin_running(config, tmp_path) as api:
        a, b = McpHttp(api.http()), McpHttp(api.http())
        heard: dict[str, list[str]] = {"a": [], "b": []}
        changed = {"a": trio.Event(), "b": trio.Event()}

        async def listen(name: str, mcp: McpHttp) -> None:
            async with mcp.http.stream("GET", "/mcp", headers=mcp.headers(accept="text/event-stream")) as s:
                while True:
                    events = await events_until(s, lambda e: e.data is not None)
                    heard[name] += [e.data["method"] for e in events if e.data is not None]
                    changed[name].set()
                    changed[name] = trio.Event()

        async def relist(mcp: McpHttp, request_id: int) -> None:
            listed = await mcp.call(request_id, "tools/list")
            assert "own_echo" in [tool["name"] for tool in listed["result"]["tools"]]

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                for name, mcp in (("a", a), ("b", b)):
                    await mcp.open()
                    await relist(mcp, 1)
                    nursery.start_soon(listen, name, mcp)
                await a.call(2, "tools/call", {"name": "own_add_tool", "arguments": {"name": "mine"}})
                while heard["a"] != ["notifications/tools/list_changed"]:
                    await changed["a"].wait()
                await trio.sleep(0.2)  # B's watcher saw the same catalog epoch by now
                assert heard["b"] == []
                await relist(a, 3)
                await a.call(4, "tools/call", {"name": "shared_add_tool", "arguments": {"name": "ours"}})
                for name in ("a", "b"):
                    while len(heard[name]) < (2 if name == "a" else 1):
                        await changed[name].wait()
                nursery.cancel_scope.cancel()
        assert heard == {
            "a": ["notifications/tools/list_changed"] * 2,
            "b": ["notifications/tools/list_changed"],
        }
