"""The bridge hub over a real WebSocket against the real Hypercorn-served admin app:
open, raw passthrough (ids untouched, nothing rewritten), close, a process that dies,
bad frames that leave the socket alive, refusals of what is not exported or over a
bound, the listing, audit rows, events and metrics."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from trio_websocket import ConnectionClosed, connect_websocket_url

from actors.protocol import bridge_envelope as env
from actors.spec import ServerSpec, Start
from supervisor.bridge.link import CLOSE_WRITE_S
from supervisor.server.serving import GRACEFUL_TIMEOUT_S
from supervisor.service import Supervisor
from supervisor.settings.model import BridgeSettings, Config, ToolSearchSettings
from supervisor.store import AuditRow
from tests.support.admin import Running, conforms
from tests.support.bridge import (
    EVERYTHING,
    INIT_PARAMS,
    Client,
    alive,
    connected,
    exported,
    hub_running,
    ws_url,
)

pytestmark = pytest.mark.real_peer


async def _pid_of(client_sessions: list[dict[str, Any]], sid: str) -> int:
    (item,) = [s for s in client_sessions if s["session_id"] == sid]
    pid = item["pid"]
    assert isinstance(pid, int)
    return pid


async def test_open_message_close_against_mini_server(tmp_path: Path) -> None:
    async with hub_running(tmp_path, exported("mini")) as running, connected(running) as client:
        with trio.fail_after(10):
            sid = await client.open("mini", frame_id=41)
            init = await client.initialize(sid, request_id="init-é")
            assert init["id"] == "init-é" and init["result"]["serverInfo"]["name"]
            for request_id in (7, "7", "a-string-id", 2**53 + 1):
                call = {"name": "echo", "arguments": {"text": f"hi {request_id!r}"}}
                answer = await client.rpc(
                    sid, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call}
                )
                assert answer["id"] == request_id and type(answer["id"]) is type(request_id)
                assert answer["result"]["content"][0]["text"] == f"hi {request_id!r}"
            reply = await running.http().request("GET", "/v1/bridge/sessions")
            conforms("list_bridge_sessions", reply)
            (item,) = reply.json()["sessions"]
            assert item["server"] == "mini" and item["tenant"] == "default" and item["state"] == "open"
            assert item["messages_in"] == 6 and item["messages_out"] == 5 and item["peer"] == "local"
            pid = item["pid"]
            assert alive(pid)
            await client.send(env.session_close(sid, id="bye"))
            closed, _ = await client.until(lambda f: f.type == env.CLOSE)
            assert closed.id == "bye" and closed.data["sessionId"] == sid
            assert closed.data["reason"] == "client_closed"
            assert not alive(pid)  # the answer comes once the process is reaped
            assert (await running.http().request("GET", "/v1/bridge/sessions")).json() == {"sessions": []}
            await client.send(env.message(sid, {"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            error = await client.next()
            assert error.type == env.ERROR and error.data["code"] == "unknown_session"
            assert error.data["sessionId"] == sid


@pytest.mark.skipif(not EVERYTHING.exists(), reason="mcp-server-everything is not installed (.ci/setup)")
async def test_open_message_close_against_server_everything(tmp_path: Path) -> None:
    spec = exported("everything", str(EVERYTHING), "stdio")
    async with hub_running(tmp_path, spec) as running, connected(running) as client:
        with trio.fail_after(30):
            sid = await client.open("everything")
            init = await client.initialize(sid)
            assert init["result"]["capabilities"]["tools"] is not None
            tools = await client.rpc(sid, {"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
            assert "echo" in {tool["name"] for tool in tools["result"]["tools"]}
            call = {"name": "echo", "arguments": {"message": "through the tunnel"}}
            answer = await client.rpc(
                sid, {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": call}
            )
            assert "through the tunnel" in answer["result"]["content"][0]["text"]
            await client.send(env.session_close(sid))
            closed, _ = await client.until(lambda f: f.type == env.CLOSE)
            assert closed.data["reason"] == "client_closed"


async def test_a_process_that_dies_closes_its_session_with_a_reason(tmp_path: Path) -> None:
    async with hub_running(tmp_path, exported("mini")) as running, connected(running) as client:
        with trio.fail_after(10):
            sid = await client.open("mini")
            other = await client.open("mini", frame_id="second")
            sessions = (await running.http().request("GET", "/v1/bridge/sessions")).json()["sessions"]
            pid = await _pid_of(sessions, sid)
            os.kill(pid, signal.SIGKILL)
            closed, _ = await client.until(lambda f: f.type == env.CLOSE)
            assert closed.data == {
                "sessionId": sid,
                "reason": "server_exited",
                "message": "the process of server 'mini' ended (process killed by signal 9)",
            }
            # The socket and its other session live on.
            await client.initialize(other)


async def test_bad_frames_are_answered_and_the_socket_lives_on(tmp_path: Path) -> None:
    bridge = BridgeSettings(max_message_bytes=4096)
    async with (
        hub_running(tmp_path, exported("mini"), bridge=bridge) as running,
        connected(running) as client,
    ):
        with trio.fail_after(10):
            sid = await client.open("mini")
            await client.ws.send_message("not json")
            assert (await client.next()).data["code"] == env.MALFORMED
            await client.ws.send_message('{"v": 1, "type": "mcp:session:open", "id": 5, "data": {}}')
            bad = await client.next()
            assert bad.type == env.ERROR and bad.id == 5 and "serverName" in bad.data["message"]
            big = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"x": "y" * 5000}}
            await client.send(env.message(sid, big))
            too_large = await client.next()
            assert too_large.type == env.ERROR and too_large.data["code"] == env.TOO_LARGE
            await client.send(env.Frame("mcp:nonsense", {}, "n"))
            assert (await client.next()).data["code"] == "unknown_type"
            await client.send(env.message("no-such-session", {"jsonrpc": "2.0", "method": "x"}))
            unknown = await client.next()
            assert (
                unknown.data["code"] == "unknown_session" and unknown.data["sessionId"] == "no-such-session"
            )
            init = await client.initialize(sid)  # the socket and the session live on
            assert init["id"] == "init"


async def test_a_server_line_over_the_bound_ends_only_that_session(tmp_path: Path) -> None:
    bridge = BridgeSettings(max_message_bytes=4096)
    specs = (exported("huge", *exported("x").command, "--huge-line", "20000"), exported("mini"))
    async with hub_running(tmp_path, *specs, bridge=bridge) as running, connected(running) as client:
        with trio.fail_after(10):
            sid = await client.open("huge")
            await client.send(
                env.message(sid, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
            )
            closed, _ = await client.until(lambda f: f.type == env.CLOSE)
            assert closed.data["reason"] == "server_message_too_large"
            other = await client.open("mini", frame_id=2)
            await client.initialize(other)


async def test_only_exported_servers_open_and_the_bounds_refuse_clearly(tmp_path: Path) -> None:
    bridge = BridgeSettings(max_sessions_per_tenant=2, max_processes=3)
    specs = (exported("mini"), exported("private", bridge=False), exported("off", enabled=False))
    async with hub_running(tmp_path, *specs, bridge=bridge) as running, connected(running) as client:
        with trio.fail_after(10):
            for name, code in (("private", "not_exported"), ("nope", "not_exported"), ("off", "disabled")):
                await client.send(env.session_open(name, id=name))
                answer = await client.next()
                assert answer.type == env.OPEN_RESULT and answer.id == name
                assert answer.data["error"]["code"] == code, answer
            await client.open("mini", 1)
            await client.open("mini", 2)
            await client.send(env.session_open("mini", id=3))
            refused = await client.next()
            assert refused.data["error"]["code"] == "too_many_sessions"
            assert "bridge.max_sessions_per_tenant" in refused.data["error"]["message"]
            metrics = (await running.http().request("GET", "/metrics")).body.decode()
            assert "mcp_supervisor_bridge_sessions 2" in metrics
            assert 'mcp_supervisor_bridge_opens_total{outcome="too_many_sessions"} 1' in metrics
            assert 'mcp_supervisor_bridge_opens_total{outcome="ok"} 2' in metrics


async def test_the_global_process_cap(tmp_path: Path) -> None:
    bridge = BridgeSettings(max_processes=1)
    async with (
        hub_running(tmp_path, exported("mini"), bridge=bridge) as running,
        connected(running) as first,
        connected(running) as second,
    ):
        with trio.fail_after(10):
            await first.open("mini")
            await second.send(env.session_open("mini", id=1))
            refused = await second.next()
            assert refused.data["error"]["code"] == "too_many_processes"
            assert "bridge.max_processes" in refused.data["error"]["message"]


async def test_audit_rows_and_events_for_open_and_close(tmp_path: Path) -> None:
    async with hub_running(tmp_path, exported("mini")) as running:
        sup = running.sup
        with sup.events.subscribe() as events, trio.fail_after(10):
            async with connected(running) as client:
                sid = await client.open("mini")
                await client.initialize(sid)
                await client.send(env.session_close(sid))
                await client.until(lambda f: f.type == env.CLOSE)
            opened = await events.events.receive()
            while opened["type"] != "bridge_session_opened":
                opened = await events.events.receive()
            closed = await events.events.receive()
            while closed["type"] != "bridge_session_closed":
                closed = await events.events.receive()
        assert opened["tenant"] == "default" and opened["session"] == sid and opened["server"] == "mini"
        assert (
            closed["reason"] == "client_closed" and closed["messages_in"] == 2 and closed["messages_out"] == 1
        )
        rows = await _audit_rows(running, sid)
        assert [(r.tool, r.server, r.tenant, r.decision, r.outcome) for r in rows] == [
            ("bridge:open", "mini", "default", "allow", "ok"),
            ("bridge:close", "mini", "default", "none", "client_closed"),
        ]
        assert (rows[1].args_bytes, rows[1].result_bytes) == (2, 1)
        assert rows[1].duration_ms >= 0


async def _audit_rows(running: Running, sid: str) -> list[AuditRow]:
    """The session's rows, oldest first, once both have reached SQLite."""
    with trio.fail_after(10):
        while True:
            rows = await running.sup.store.read(lambda store: store.audit_rows(session=sid))
            if len(rows) == 2:
                return rows[::-1]
            await trio.sleep(0.05)


async def test_shutdown_closes_open_sockets_and_stops_their_processes(tmp_path: Path) -> None:
    async with trio.open_nursery() as outer:
        async with hub_running(tmp_path, exported("mini")) as running:
            with trio.fail_after(10):
                client = Client(await connect_websocket_url(outer, ws_url(running)))
                sid = await client.open("mini")
                await client.initialize(sid)
                sessions = (await running.http().request("GET", "/v1/bridge/sessions")).json()["sessions"]
                pid = await _pid_of(sessions, sid)
            # Leaving the block cancels serve while the socket is open: its drain
            # closes the socket (1001) and stops the process.
        with trio.fail_after(10), pytest.raises(ConnectionClosed) as closed:
            while True:
                await client.ws.get_message()
        assert closed.value.reason is not None and closed.value.reason.code == 1001
        assert not alive(pid)
        await client.ws.aclose()


async def test_a_closed_sockets_heartbeat_does_not_hold_the_drain(tmp_path: Path) -> None:
    """Hypercorn's ping task used to sleep a whole heartbeat (20 s) after its socket
    closed, and the drain waited for it until Hypercorn's graceful timeout."""
    async with hub_running(tmp_path, exported("mini")) as running:
        async with connected(running) as client:
            await client.open("mini")
        left = trio.current_time()
    assert trio.current_time() - left < GRACEFUL_TIMEOUT_S / 2


async def test_an_idle_socket_is_closed_and_its_processes_stop(
    tmp_path: Path, thread_safe_clock: trio.testing.MockClock
) -> None:
    """On virtual time: a socket with no frame either way for ``idle_s`` is closed
    (4408) that long after its last frame, not before and not much later, and its
    session ends for that reason, its process gone. Heartbeats pass meanwhile (a ping
    is no frame). Hypercorn's ping task wakes every ``TICK_S``, and the clock jumps
    one tick per 50 ms of real idleness: a few seconds of idleness cost a fraction of
    a second."""
    idle_s = 4.0
    bridge = BridgeSettings(idle_s=idle_s, heartbeat_s=1.5)
    async with hub_running(tmp_path, exported("mini"), bridge=bridge) as running:
        with running.sup.events.subscribe() as events:
            async with connected(running) as client:
                before_open = trio.current_time()
                await client.open("mini")  # the last frame either way is its answer
                opened_at = trio.current_time()
                with trio.fail_after(idle_s * 2), pytest.raises(ConnectionClosed) as closed:
                    await client.ws.get_message()
                closed_at = trio.current_time()
            assert closed.value.reason is not None and closed.value.reason.code == 4408
            assert closed_at - before_open >= idle_s
            assert closed_at - opened_at < idle_s + 2 * CLOSE_WRITE_S
            with trio.fail_after(10):
                opened = await _next_event(events.events, "bridge_session_opened")
                ended = await _next_event(events.events, "bridge_session_closed")
        assert ended["session"] == opened["session"] and ended["reason"] == "idle"
        assert not alive(opened["pid"])  # the event comes once the process is reaped
        assert (await running.http().request("GET", "/v1/bridge/sessions")).json() == {"sessions": []}


async def _next_event(events: trio.MemoryReceiveChannel[Mapping[str, Any]], kind: str) -> Mapping[str, Any]:
    while (event := await events.receive())["type"] != kind:
        pass
    return event


async def test_a_supervisor_uses_this_hub_through_its_websocket_transport(tmp_path: Path) -> None:
    """Supervisor A, with a ``type: websocket`` server, uses supervisor B's real hub."""
    tokens = {"b-hub-token-0123456789": "alice"}
    async with hub_running(tmp_path / "b", exported("mini"), tokens=tokens) as hub:
        spec = ServerSpec(
            "bridged",
            type="websocket",
            url=ws_url(hub),
            server_name="mini",
            headers={"Authorization": "Bearer b-hub-token-0123456789"},
            trusted=True,
            start=Start.EAGER,
        )
        config = Config(servers=(spec,), tool_search=ToolSearchSettings(enabled=False))
        async with Supervisor.open(config, state_dir=tmp_path / "a") as sup, sup.session() as session:
            with trio.fail_after(20):
                turn = await session.begin_turn()
                echoed = await turn.call("bridged_echo", {"text": "A through B"})
                assert echoed.ok and echoed.text == "A through B", echoed
                (item,) = (
                    await hub.http("b-hub-token-0123456789").request("GET", "/v1/bridge/sessions")
                ).json()["sessions"]
                assert item["tenant"] == "alice" and item["server"] == "mini" and item["messages_in"] >= 3


async def test_frames_without_v_are_served_as_version_1(tmp_path: Path) -> None:
    """Another project's bridge (AIRI's) sends frames of our shape without ``"v"``."""
    async with hub_running(tmp_path, exported("mini")) as running, connected(running) as client:

        async def bare(frame: dict[str, Any]) -> None:
            await client.ws.send_message(orjson.dumps(frame).decode())

        with trio.fail_after(10):
            await bare({"type": env.OPEN, "id": "o", "data": {"serverName": "mini"}})
            opened, _ = await client.until(lambda f: f.type == env.OPEN_RESULT)
            sid = opened.data["sessionId"]
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS}
            await bare({"type": env.MESSAGE, "data": {"sessionId": sid, "jsonrpc": init}})
            answer, _ = await client.until(lambda f: f.type == env.MESSAGE)
            assert answer.data["jsonrpc"]["id"] == 1 and "serverInfo" in answer.data["jsonrpc"]["result"]
            await bare({"type": env.CLOSE, "id": "c", "data": {"sessionId": sid}})
            closed, _ = await client.until(lambda f: f.type == env.CLOSE)
            assert closed.id == "c" and closed.data["reason"] == "client_closed"
