"""The admin API's endpoints through the real Hypercorn server on 127.0.0.1:0.

Real supervisor, real mini_server.py subprocesses, real HTTP (h11 over a TCP socket);
every answer is also checked against the schema the OpenAPI document promises.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from actors.spec import Start
from supervisor.admin.openapi import document
from supervisor.server import serve
from supervisor.server import serving as admin_server
from supervisor.service import Supervisor
from tests.support.admin import (
    Http,
    Sse,
    admin_running,
    config_of,
    conforms,
    mini_spec,
    path_of,
    until,
    wait_for,
)


async def test_health_metrics_and_openapi(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        await wait_for(http, "/v1/servers/mini", lambda d: d["state"] == "steady")  # the epoch settled
        with trio.fail_after(10):
            health = await http.request("GET", "/v1/health")
            conforms("health", health)
            assert health.json()["status"] == "ok" and health.json()["servers"] == 1
            assert health.json()["epoch"] == api.sup.router.cell.current.epoch

            metrics = await http.request("GET", "/metrics")
            conforms("metrics", metrics)
            assert metrics.headers["content-type"] == "text/plain; version=0.0.4"
            text = metrics.body.decode()
            for family in (
                "mcp_supervisor_connections",
                "mcp_supervisor_reconnects_total",
                "mcp_supervisor_calls_total",
                "mcp_supervisor_call_duration_seconds",
                "mcp_supervisor_approvals_pending",
                "mcp_supervisor_catalog_epoch",
            ):
                assert f"# TYPE {family} " in text, family
            assert 'mcp_supervisor_reconnects_total{server="mini"} 0' in text

            openapi = await http.request("GET", "/v1/openapi.json")
            conforms("openapi", openapi)
            assert openapi.json() == orjson.loads(orjson.dumps(document()))
            assert openapi.json()["openapi"].startswith("3.1")


async def test_servers_list_and_detail(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini", "--stderr-lines", "2"), mini_spec("lazy", start=Start.LAZY))
    async with admin_running(config, tmp_path) as api:
        http = api.http()
        listing = await wait_for(
            http,
            "/v1/servers",
            lambda d: any(s["name"] == "mini" and s["state"] == "steady" for s in d["servers"]),
        )
        conforms("list_servers", await http.request("GET", "/v1/servers"))
        by_name = {s["name"]: s for s in listing["servers"]}
        assert list(by_name) == ["mini", "lazy"]  # config order
        mini = by_name["mini"]
        assert mini["available"] is True and mini["tools"] == 9 and mini["type"] == "local"
        assert mini["scope"] == "shared" and mini["trusted"] is True and mini["attempt"] == 0
        assert mini["since"] is not None and abs(mini["since"] - time.time()) < 30
        assert mini["retry_in_s"] is None and mini["next_retry_at"] is None
        assert by_name["lazy"]["state"] == "idle" and by_name["lazy"]["since"] is None

        detail = await http.request("GET", "/v1/servers/mini")
        conforms("get_server", detail)
        data = detail.json()
        assert [t["state"] for t in data["transitions"]][-1] == "steady"
        assert data["transitions"][0]["previous"] == "idle"
        assert data["stderr_tail"][-2:] == ["stderr line 0", "stderr line 1"]
        assert data["in_flight"] == 0

        missing = await http.request("GET", "/v1/servers/nope")
        conforms("get_server", missing)
        assert missing.status == 404 and missing.json()["error"]["code"] == "not_found"


async def test_backoff_shows_attempt_last_error_and_retry_countdown(tmp_path: Path) -> None:
    spec = mini_spec("dying", "--exit-during-init", reconnect_schedule_s=(30.0,))
    async with admin_running(config_of(spec), tmp_path) as api:
        http = api.http()
        data = await wait_for(http, "/v1/servers/dying", lambda d: d["state"] == "backoff")
        assert data["attempt"] >= 1 and data["available"] is False
        assert data["last_error"] and "dying" in data["last_error"]
        assert 0 <= data["last_error_age_s"] < 10
        assert abs(data["last_error_at"] - (time.time() - data["last_error_age_s"])) < 2
        assert 0 < data["retry_in_s"] <= 33  # 30 s, jittered by up to a tenth
        assert abs(data["next_retry_at"] - (time.time() + data["retry_in_s"])) < 2
        assert data["transitions"][-1]["state"] == "backoff" and data["transitions"][-1]["reason"]


async def test_restart_disable_enable(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        await wait_for(http, "/v1/servers/mini", lambda d: d["state"] == "steady")

        reply = await http.request("POST", "/v1/servers/mini/disable")
        conforms("disable_server", reply)
        assert reply.status == 202 and reply.json() == {"server": "mini", "command": "disable"}
        await wait_for(http, "/v1/servers/mini", lambda d: d["state"] == "disabled")

        reply = await http.request("POST", "/v1/servers/mini/enable")
        conforms("enable_server", reply)
        assert reply.status == 202
        await wait_for(http, "/v1/servers/mini", lambda d: d["state"] not in ("disabled", "teardown"))

        before = len((await http.request("GET", "/v1/servers/mini")).json()["transitions"])
        await wait_for(http, "/v1/servers/mini", lambda d: d["state"] == "steady")
        reply = await http.request("POST", "/v1/servers/mini/restart")
        conforms("restart_server", reply)
        assert reply.status == 202

        def restarted(data: dict[str, Any]) -> bool:
            states = [t["state"] for t in data["transitions"]]
            return data["state"] == "steady" and "teardown" in states[before - 1 :]

        await wait_for(http, "/v1/servers/mini", restarted)

        for command in ("restart", "enable", "disable"):
            missing = await http.request("POST", f"/v1/servers/nope/{command}")
            assert missing.status == 404 and missing.json()["error"]["code"] == "not_found"


async def test_tools_list(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        await wait_for(http, "/v1/servers/mini", lambda d: d["state"] == "steady")
        data = await wait_for(http, "/v1/tools", lambda d: len(d["tools"]) == 9)
        conforms("list_tools", await http.request("GET", "/v1/tools"))
        echo = next(t for t in data["tools"] if t["id"] == "mini_echo")
        assert echo["server"] == "mini" and echo["name"] == "echo" and echo["available"] is True
        assert echo["stale"] is False and echo["input_schema"]["required"] == ["text"]
        assert data["epoch"] == api.sup.router.cell.current.epoch


async def test_session_turn_call_search_and_delete(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        with trio.fail_after(15):
            created = await http.request(
                "POST", "/v1/sessions", json={"host_tools": 2, "pinned": ["mini_echo"]}
            )
            conforms("create_session", created)
            sid = created.json()["session_id"]
            assert api.sup.approvals.remote  # set while the admin API serves

            begun = await http.request("POST", f"/v1/sessions/{sid}/turns")
            conforms("begin_turn", begun)
            turn = begun.json()
            assert turn["search_enabled"] is False and turn["epoch"] >= 1
            assert {"mini_echo", "mini_add"} <= {t["id"] for t in turn["tools"]}
            tid = turn["turn_id"]

            called = await http.call(sid, tid, "mini_add", {"a": 2, "b": 3})
            conforms("call_tool", called)
            assert called.json()["ok"] is True and called.json()["text"] == "5"
            assert called.headers["x-request-id"].startswith("req-")

            chosen = await http.call(sid, tid, "mini_echo", {"text": "hi"}, request_id="my-id.1")
            assert chosen.headers["x-request-id"] == "my-id.1" and chosen.json()["text"] == "hi"

            failed = await http.call(sid, tid, "mini_nope")
            conforms("call_tool", failed)
            assert failed.status == 200 and failed.json()["error"]["code"] == "unknown_tool"
            # Arguments that are no object: the call's own refusal (an envelope and an audit row).
            refused = await http.call(sid, tid, "mini_echo", [1])
            conforms("call_tool", refused)
            assert refused.status == 200 and refused.json()["error"]["code"] == "invalid_arguments"

            found = await http.request("POST", f"/v1/sessions/{sid}/tool_search", json={"query": "echo text"})
            conforms("tool_search", found)
            assert found.json()["turn_id"] == tid  # the latest turn was used
            assert "mini_echo" in [m["id"] for m in found.json()["matches"]]

            # Wrong body field types name the field.
            for path, body, field in (
                ("/v1/sessions", {"host_tools": "2"}, "host_tools"),
                ("/v1/sessions", {"pinned": "mini_echo"}, "pinned"),
                (f"/v1/sessions/{sid}/turns/{tid}/calls", {"tool": 3}, "tool"),
                (f"/v1/sessions/{sid}/turns/{tid}/calls", {"arguments": {}}, "tool"),
                (f"/v1/sessions/{sid}/turns/{tid}/calls", {"tool": "x", "request_id": "a b"}, "request_id"),
                (f"/v1/sessions/{sid}/tool_search", {"query": ["x"]}, "query"),
            ):
                reply = await http.request("POST", path, json=body)
                assert reply.status == 400, (path, body, reply)
                assert reply.json()["error"]["code"] == "bad_request"
                assert f"$.{field}" in reply.json()["error"]["message"], reply

            deleted = await http.request("DELETE", f"/v1/sessions/{sid}")
            conforms("delete_session", deleted)
            assert deleted.status == 204
            for method, path in (
                ("DELETE", f"/v1/sessions/{sid}"),
                ("POST", f"/v1/sessions/{sid}/turns"),
                ("POST", f"/v1/sessions/{sid}/turns/{tid}/calls"),
                ("POST", f"/v1/sessions/{sid}/tool_search"),
            ):
                gone = await http.request(method, path, json={"tool": "mini_echo", "query": "x"})
                assert gone.status == 404 and gone.json()["error"]["code"] == "not_found", (path, gone)


async def test_tool_search_begins_a_turn_when_there_is_none(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        with trio.fail_after(10):
            sid = await http.session()
            found = await http.request(
                "POST", f"/v1/sessions/{sid}/tool_search", json={"query": "add numbers"}
            )
            assert found.status == 200 and found.json()["matches"][0]["id"] == "mini_add"
            tid = found.json()["turn_id"]
            # The turn it began is a turn of the session like any other.
            assert (await http.call(sid, tid, "mini_add", {"a": 1, "b": 1})).json()["text"] == "2"
            unknown_turn = await http.call(sid, "no-such-turn", "mini_add", {"a": 1, "b": 1})
            assert unknown_turn.status == 404


async def test_call_stream_request_received_progress_result_done(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        with trio.fail_after(15):
            sid = await http.session()
            tid = (await http.turn(sid))["turn_id"]
            body = {"tool": "mini_progress", "arguments": {"steps": 3, "interval": 0.05}, "request_id": "p-1"}
            async with http.stream("POST", f"/v1/sessions/{sid}/turns/{tid}/calls", json=body) as stream:
                assert stream.status == 200
                assert stream.headers["content-type"].startswith("text/event-stream")
                assert stream.headers["x-request-id"] == "p-1"
                events = await stream.rest()
        names = [e.event for e in events]
        assert names[0] == "request_received" and events[0].data == {
            "request_id": "p-1",
            "tool": "mini_progress",
        }
        assert names[-2:] == ["result", "done"], names
        assert set(names[1:-2]) == {"progress"} and len(names[1:-2]) >= 1, names
        assert [e.data["progress"] for e in events if e.event == "progress"] == sorted(
            e.data["progress"] for e in events if e.event == "progress"
        )
        assert events[1].data["total"] == 3 and events[1].data["request_id"] == "p-1"
        assert events[-2].data["ok"] is True and events[-2].data["text"] == "done after 3 steps"
        assert events[-1].data == {"request_id": "p-1"}


async def test_call_stream_keeps_its_order_when_the_call_fails(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        with trio.fail_after(15):
            sid = await http.session()
            tid = (await http.turn(sid))["turn_id"]
            results: dict[str, list[Sse]] = {}
            for tool, arguments in (("mini_nope", {}), ("mini_fail", {}), ("mini_echo", {"text": 5})):
                path = f"/v1/sessions/{sid}/turns/{tid}/calls"
                async with http.stream("POST", path, json={"tool": tool, "arguments": arguments}) as stream:
                    results[tool] = await stream.rest()
        for tool, events in results.items():
            assert [e.event for e in events] == ["request_received", "result", "done"], (tool, events)
            assert events[1].data["ok"] is False
        assert results["mini_nope"][1].data["error"]["code"] == "unknown_tool"
        assert results["mini_fail"][1].data["error"]["code"] == "tool_error"
        assert results["mini_echo"][1].data["error"]["code"] == "invalid_arguments"


async def test_cancel_a_request_in_flight(tmp_path: Path) -> None:
    calls_log = tmp_path / "calls.log"
    async with admin_running(config_of(mini_spec("mini", "--calls-log", str(calls_log))), tmp_path) as api:
        http = api.http()
        with trio.fail_after(15):
            sid = await http.session()
            tid = (await http.turn(sid))["turn_id"]
            answers: list[Any] = []

            async def slow() -> None:
                answers.append(await http.call(sid, tid, "mini_sleep", {"seconds": 30}, request_id="slow-1"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow)
                await until(calls_log.exists)  # the server has the call: it is in flight
                duplicate = await http.call(sid, tid, "mini_echo", {"text": "x"}, request_id="slow-1")
                assert duplicate.status == 409 and duplicate.json()["error"]["code"] == "conflict"
                cancelled = await http.request("POST", "/v1/requests/slow-1/cancel")
                conforms("cancel_request", cancelled)
                assert cancelled.status == 202
            assert answers[0].json()["ok"] is False
            assert answers[0].json()["error"]["code"] == "cancelled"
            again = await http.request("POST", "/v1/requests/slow-1/cancel")
            conforms("cancel_request", again)
            assert again.status == 404


async def test_untrusted_write_waits_for_an_operator_approval(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini", trusted=False)), tmp_path) as api:
        http = api.http()
        with trio.fail_after(20):
            sid = await http.session()
            tid = (await http.turn(sid))["turn_id"]
            async with http.stream("GET", "/v1/events") as events:
                hello = await events.next()
                assert hello is not None and hello.event == "hello"
                assert 1 <= hello.data["epoch"] <= api.sup.router.cell.current.epoch
                answers: list[Any] = []

                async def write() -> None:
                    answers.append(await http.call(sid, tid, "mini_add_tool", {"name": "late"}))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(write)
                    pending = await wait_for(http, "/v1/approvals", lambda d: len(d["approvals"]) == 1)
                    conforms("list_approvals", await http.request("GET", "/v1/approvals"))
                    item = pending["approvals"][0]
                    assert item["tool"] == "mini_add_tool" and item["session"] == sid
                    assert item["permission"] == "mcp:mini:add_tool" and item["arguments"] == {"name": "late"}
                    seen = await events.until(lambda e: e.event == "approval")
                    assert seen[-1].data["status"] == "pending" and seen[-1].data["id"] == item["id"]

                    for body in ({"decision": "maybe"}, {"decision": "allow", "remember": "forever"}, {}):
                        bad = await http.request("POST", f"/v1/approvals/{item['id']}", json=body)
                        assert bad.status == 400, (body, bad)
                    unknown = await http.request("POST", "/v1/approvals/apr-999", json={"decision": "allow"})
                    conforms("answer_approval", unknown)
                    assert unknown.status == 404
                    answered = await http.request(
                        "POST", f"/v1/approvals/{item['id']}", json={"decision": "allow"}
                    )
                    conforms("answer_approval", answered)
                    assert answered.status == 204
                assert answers[0].json()["ok"] is True and answers[0].json()["text"] == "added late"
                decided = await events.until(
                    lambda e: e.event == "approval" and e.data["status"] != "pending"
                )
                assert decided[-1].data["status"] == "allow"
                call = await events.until(lambda e: e.event == "call")
                assert call[-1].data["tool"] == "mini_add_tool" and call[-1].data["decision"] == "ask"
            assert (await http.request("GET", "/v1/approvals")).json() == {"approvals": []}


async def test_event_stream_shows_state_and_epoch_changes(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        await wait_for(http, "/v1/servers/mini", lambda d: d["state"] == "steady")
        with trio.fail_after(15):
            async with http.stream("GET", "/v1/events") as events:
                assert events.status == 200 and events.headers["content-type"].startswith("text/event-stream")
                hello = await events.next()
                assert hello is not None and hello.event == "hello"
                assert (await http.request("POST", "/v1/servers/mini/restart")).status == 202
                seen = await events.until(lambda e: e.event == "state" and e.data["state"] == "steady")
                states = [e.data["state"] for e in seen if e.event == "state"]
                assert states[0] == "teardown" and all(
                    e.data["server"] == "mini" for e in seen if e.event == "state"
                )
                await events.until(lambda e: e.event == "epoch")
        # A client that leaves is forgotten.
        await until(lambda: api.sup.events.subscribers == 0)
        # HEAD of the stream answers at once, without a body.
        head = await http.request("HEAD", "/v1/events")
        assert head.status == 200 and head.body == b""


async def test_a_client_leaving_a_streamed_call_cancels_it(tmp_path: Path) -> None:
    calls_log = tmp_path / "calls.log"
    async with admin_running(config_of(mini_spec("mini", "--calls-log", str(calls_log))), tmp_path) as api:
        http = api.http()
        with trio.fail_after(15):
            sid = await http.session()
            tid = (await http.turn(sid))["turn_id"]
            with api.sup.events.subscribe() as sub:
                body = {"tool": "mini_sleep", "arguments": {"seconds": 30}, "request_id": "gone-1"}
                async with http.stream("POST", f"/v1/sessions/{sid}/turns/{tid}/calls", json=body) as stream:
                    assert (await stream.next()) == Sse(
                        "request_received", {"request_id": "gone-1", "tool": "mini_sleep"}
                    )
                    await until(calls_log.exists)
                # The connection is closed: the call ends (the server is told) well before 30 s.
                while (event := await sub.events.receive())["type"] != "call":
                    pass
            assert event["tool"] == "mini_sleep" and event["outcome"] == "cancelled"
            assert len(api.sup.requests) == 0
            # The server was told (mini_server logs each notifications/cancelled it gets).
            await wait_for(
                http,
                "/v1/servers/mini",
                lambda d: any("cancelled request" in line for line in d["stderr_tail"]),
            )


async def test_unknown_objects_are_json_404s(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        ids = {"sid": "nope", "tid": "nope", "approval_id": "nope", "rid": "nope", "name": "nope"}
        with trio.fail_after(10):
            for operation in ("delete_session", "begin_turn", "call_tool", "tool_search", "cancel_request"):
                route_path = path_of(operation, **ids)
                method = "DELETE" if operation == "delete_session" else "POST"
                reply = await http.request(
                    method, route_path, json={"tool": "x", "query": "x", "decision": "deny"}
                )
                assert reply.status == 404 and reply.json()["error"]["code"] == "not_found", (
                    operation,
                    reply,
                )
                conforms(operation, reply)
            route = await http.request("GET", "/v1/nothing/here")
            assert route.status == 404 and route.json()["error"]["code"] == "not_found"
            method = await http.request("PUT", "/v1/sessions")
            assert method.status == 405 and method.json()["error"]["code"] == "method_not_allowed"
            assert method.headers["allow"] == "GET, POST"


async def test_cancelling_the_server_drains_with_an_answer_for_every_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shutdown: no new work, calls in flight get their grace and then a ``cancelled``
    answer (a stream its result and done), event streams end, all within the deadline."""
    monkeypatch.setattr(admin_server, "CALL_GRACE_S", 0.5)
    calls_log = tmp_path / "calls.log"
    config = config_of(mini_spec("mini", "--calls-log", str(calls_log)))
    results: dict[str, Any] = {}
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        with trio.fail_after(20):
            async with trio.open_nursery() as clients:
                async with trio.open_nursery() as admin:
                    http = Http(await admin.start(serve, sup, "127.0.0.1:0"))
                    sid = await http.session()
                    tid = (await http.turn(sid))["turn_id"]
                    calls = f"/v1/sessions/{sid}/turns/{tid}/calls"

                    async def call(name: str, seconds: float) -> None:
                        results[name] = await http.call(sid, tid, "mini_sleep", {"seconds": seconds})

                    async def streamed() -> None:
                        body = {"tool": "mini_sleep", "arguments": {"seconds": 30}}
                        async with http.stream("POST", calls, json=body) as stream:
                            results["sse"] = await stream.rest()

                    async def listen(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                        async with http.stream("GET", "/v1/events") as stream:
                            task_status.started()
                            results["events"] = await stream.rest()

                    await clients.start(listen)
                    clients.start_soon(call, "long", 30)
                    clients.start_soon(call, "short", 0.3)
                    clients.start_soon(streamed)
                    await until(lambda: calls_log.exists() and len(calls_log.read_text().splitlines()) == 3)
                    started = trio.current_time()
                    admin.cancel_scope.cancel()
                drained_in = trio.current_time() - started
        assert not sup.approvals.remote
    assert drained_in < admin_server.GRACEFUL_TIMEOUT_S, drained_in
    assert results["short"].json()["text"] == "slept"  # finished within the grace
    assert results["long"].json()["error"]["code"] == "cancelled"
    assert [e.event for e in results["sse"]] == ["request_received", "result", "done"]
    assert results["sse"][1].data["error"]["code"] == "cancelled"
    assert results["events"][0].event == "hello"  # and then the stream ended
