"""Sessions the hub relays to dial-out peers, held to what its own sessions are held to:
the tenant's bound, audit rows, events and metrics; a peer's own process cap; a peer's
``mcp:error``; and a client too slow to read, which is cut off without stalling the
peer's other clients. Real Hypercorn-served hub, real ``mcp-supervisor bridge`` peers
(or, where the peer must misbehave, a socket of the test's speaking the envelope)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from trio_websocket import ConnectionClosed

from actors.protocol import bridge_envelope as env
from actors.protocol.bridge_envelope import Frame
from supervisor.bridge import dialout
from supervisor.bridge.link import BridgeLink
from supervisor.bridge.peers import PeerRegistry
from supervisor.settings.model import BridgeSettings, Role, TokenGrant
from supervisor.store import AuditRow
from tests.bridge.test_bridge_peers import (
    PEER,
    peer_config,
    peer_running,
    peers_of,
    round_trip,
)
from tests.bridge.test_bridge_peers import (
    TOKENS as PEER_TOKENS,
)
from tests.support.admin import ALICE, MINI, Running
from tests.support.bridge import Client, connected, exported, hub_running

OPS = "ops-token-0123456789abcd"
TOKENS = {**PEER_TOKENS, OPS: TokenGrant("ops", Role.OPERATOR)}


async def _rows(running: Running, sid: str, count: int) -> list[AuditRow]:
    """The session's audit rows, oldest first, once ``count`` have reached SQLite."""
    with trio.fail_after(10):
        while True:
            rows = await running.sup.store.read(lambda s: s.audit_rows(session=sid))
            if len(rows) >= count:
                return rows[::-1]
            await trio.sleep(0.05)


async def _event(events: Any, kind: str) -> dict[str, Any]:
    while (event := await events.events.receive())["type"] != kind:
        pass
    found: dict[str, Any] = event
    return found


async def _metrics(running: Running) -> str:
    return (await running.http(OPS).request("GET", "/metrics")).body.decode()


async def test_relayed_and_local_sessions_share_the_tenant_bound(tmp_path: Path) -> None:
    one_each = BridgeSettings(max_sessions_per_tenant=1)
    async with (
        hub_running(tmp_path, exported("near"), tokens=TOKENS, bridge=one_each) as running,
        peer_running(running, peer_config(tmp_path, "far-mini")),
        connected(running, token=ALICE) as client,
    ):
        with trio.fail_after(10):
            far = await client.open("far-mini", "far")
            await client.send(env.session_open("near", id="near"))
            refused, _ = await client.until(lambda f: f.type == env.OPEN_RESULT)
            assert refused.id == "near" and refused.data["error"]["code"] == "too_many_sessions"
            await client.send(env.session_close(far, id="bye"))
            await client.until(lambda f: f.type == env.CLOSE and f.id == "bye")
            await client.open("near", "near-2")
            await client.send(env.session_open("far-mini", id="far-2"))
            refused, _ = await client.until(lambda f: f.type == env.OPEN_RESULT)
            assert refused.id == "far-2" and refused.data["error"]["code"] == "too_many_sessions"
        assert 'mcp_supervisor_bridge_opens_total{outcome="too_many_sessions"} 2' in await _metrics(running)


async def test_a_relayed_session_is_audited_published_and_counted(tmp_path: Path) -> None:
    async with (
        hub_running(tmp_path, tokens=TOKENS) as running,
        peer_running(running, peer_config(tmp_path, "far-mini")),
    ):
        [peer] = await peers_of(running)
        with running.sup.events.subscribe() as events, trio.fail_after(10):
            async with connected(running, token=ALICE) as client:
                sid = await client.open("far-mini")
                await round_trip(client, sid)
                assert "mcp_supervisor_bridge_sessions 1" in await _metrics(running)
                await client.send(env.session_close(sid))
                await client.until(lambda f: f.type == env.CLOSE)
            opened = await _event(events, "bridge_session_opened")
            closed = await _event(events, "bridge_session_closed")
        assert (opened["session"], opened["server"], opened["peer"]) == (sid, "far-mini", peer["peer"])
        assert opened["tenant"] == "alice" and opened["pid"] is None
        assert (closed["reason"], closed["messages_in"], closed["messages_out"]) == ("client_closed", 3, 2)
        assert closed["peer"] == peer["peer"]
        rows = await _rows(running, sid, 2)
        served = f"far-mini@{peer['peer']}"
        assert [(r.tool, r.server, r.tenant, r.decision, r.outcome) for r in rows] == [
            ("bridge:open", served, "alice", "allow", "ok"),
            ("bridge:close", served, "alice", "none", "client_closed"),
        ]
        assert (rows[1].args_bytes, rows[1].result_bytes) == (3, 2) and rows[1].duration_ms >= 0
        metrics = await _metrics(running)
        assert 'mcp_supervisor_bridge_opens_total{outcome="ok"} 1' in metrics
        assert 'mcp_supervisor_bridge_closes_total{reason="client_closed"} 1' in metrics
        assert "mcp_supervisor_bridge_sessions 0" in metrics


async def test_a_peer_caps_its_own_processes_and_the_hub_cap_is_the_hubs(tmp_path: Path) -> None:
    """The peer's config says ``bridge.max_processes: 1``: its second open is refused,
    and the client sees why. The hub's cap of 1 is full of its own process, which does
    not stop the first relayed open."""
    config = tmp_path / "capped.json"
    server = {"command": [sys.executable, MINI], "bridge": True}
    config.write_text(json.dumps({"servers": {"far-mini": server}, "bridge": {"max_processes": 1}}))
    one = BridgeSettings(max_processes=1)
    async with (
        hub_running(tmp_path, exported("near"), tokens=TOKENS, bridge=one) as running,
        peer_running(running, config),
        connected(running, token=ALICE) as client,
    ):
        with trio.fail_after(10):
            await client.open("near", "near")
            first = await client.open("far-mini", "first")
            await client.send(env.session_open("far-mini", id="second"))
            refused, _ = await client.until(lambda f: f.type == env.OPEN_RESULT)
            assert refused.id == "second" and refused.data["error"]["code"] == "too_many_processes"
            assert "bridge.max_processes" in refused.data["error"]["message"]
            assert "peer" in refused.data["error"]["message"]
            await round_trip(client, first)  # the first lives on
            await client.send(env.session_close(first, id="bye"))
            await client.until(lambda f: f.type == env.CLOSE and f.id == "bye")
            while True:  # once the peer has reaped the first, it takes another
                await client.send(env.session_open("far-mini", id="third"))
                answer, _ = await client.until(lambda f: f.type == env.OPEN_RESULT)
                if "sessionId" in answer.data:
                    break
                await trio.sleep(0.05)
        assert 'mcp_supervisor_bridge_opens_total{outcome="too_many_processes"}' in await _metrics(running)


@asynccontextmanager
async def fake_peer(running: Running, server: str) -> AsyncIterator[Client]:
    """A peer socket the test speaks for, registered as offering ``server``."""
    async with connected(running, token=PEER) as peer:
        await peer.send(env.peer_register([(server, "d" * 64)], id="r"))
        answer, _ = await peer.until(lambda f: f.type == env.PEER_REGISTER_RESULT)
        assert answer.data["servers"] == [server], answer
        yield peer


async def _relayed_open(client: Client, peer: Client, frame_id: str) -> str:
    """The client opens ``fake``; the fake peer takes it."""
    await client.send(env.session_open("fake", id=frame_id))
    asked, _ = await peer.until(lambda f: f.type == env.OPEN)
    sid: str = asked.data["sessionId"]
    await peer.send(env.open_result(sid, asked.id))
    answer, _ = await client.until(lambda f: f.type == env.OPEN_RESULT and f.id == frame_id)
    assert answer.data["sessionId"] == sid
    return sid


async def test_a_peers_error_for_a_session_ends_it_on_the_client(tmp_path: Path) -> None:
    async with (
        hub_running(tmp_path, tokens=TOKENS) as running,
        fake_peer(running, "fake") as peer,
        connected(running, token=ALICE) as client,
    ):
        with trio.fail_after(5):  # each step is at once
            sid = await _relayed_open(client, peer, "one")
            # An error about a session that lives on reaches its client as it is.
            await peer.send(env.error("bad_server_output", "a line that is not JSON was dropped", sid))
            passed, _ = await client.until(lambda f: f.type == env.ERROR)
            assert passed.data == {
                "code": "bad_server_output",
                "message": passed.data["message"],
                "sessionId": sid,
            }
            # An error that names no session is the peer's own: logged, the link lives on.
            await peer.send(env.error(env.MALFORMED, "something the hub sent was not understood"))
            await peer.send(env.message(sid, {"jsonrpc": "2.0", "method": "notifications/x"}))
            relayed, _ = await client.until(lambda f: f.type == env.MESSAGE)
            assert relayed.data["jsonrpc"]["method"] == "notifications/x"
            # The peer no longer knows the session: it ends on the client, saying why.
            await peer.send(env.error("unknown_session", "this peer runs no session", sid))
            closed, _ = await client.until(lambda f: f.type == env.CLOSE)
            assert closed.data["sessionId"] == sid and closed.data["reason"] == "peer_error"
            assert "lost the session" in closed.data["message"] and "'fake'" in closed.data["message"]
            reply = await running.http(ALICE).request("GET", "/v1/bridge/sessions")
            assert reply.json()["sessions"] == []
            # The peer and the client carry on.
            again = await _relayed_open(client, peer, "two")
            assert again != sid
        rows = await _rows(running, sid, 2)
        assert rows[1].tool == "bridge:close" and rows[1].outcome == "peer_error"


async def test_the_peer_answers_a_message_for_a_session_it_does_not_run() -> None:
    peer = dialout.PeerLink(None, {}, None)  # type: ignore[arg-type]  # neither is used here
    async with trio.open_nursery() as nursery:
        await peer._serve(env.message("gone", {"jsonrpc": "2.0", "id": 1, "method": "ping"}), nursery)
        await peer._serve(env.session_close("gone"), nursery)  # a close crossing ours: nothing
    answer = env.decode(peer._pending.receive_nowait())
    assert isinstance(answer, Frame) and answer.type == env.ERROR
    assert answer.data["code"] == "unknown_session" and answer.data["sessionId"] == "gone"
    with pytest.raises(trio.WouldBlock):
        peer._pending.receive_nowait()


async def test_a_client_that_stops_reading_is_cut_off_not_the_peer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Client A floods its relayed session with big answers and reads none; client B
    on the same peer keeps working, and A (only A) is cut off: its session closed at
    once, and 4429 once it reads again."""
    monkeypatch.setattr("supervisor.bridge.link.RELAY_BUFFER_BYTES", 256 * 1024)
    big = {"name": "big", "arguments": {"bytes": 3 * 1024 * 1024}}
    async with (
        hub_running(tmp_path, tokens=TOKENS) as running,
        peer_running(running, peer_config(tmp_path, "far-mini")),
        connected(running, token=ALICE, max_message_size=8 * 1024 * 1024) as slow,
        connected(running, token=ALICE) as other,
    ):
        with trio.fail_after(20):
            stalled = await slow.open("far-mini", "slow")
            await slow.initialize(stalled)
            steady = await other.open("far-mini", "steady")
            await round_trip(other, steady)
            for n in range(8):  # 24 MiB of answers, more than the sockets' buffers hold
                call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": big}
                await slow.send(env.message(stalled, call))
            while True:  # until the hub has cut the slow client off
                if all(s["session_id"] != stalled for s in await _sessions(running)):
                    break
                await trio.sleep(0.05)
        with trio.fail_after(5):  # the peer's other client was never held up
            await round_trip(other, steady)
        assert [p["sessions"] for p in await peers_of(running)] == [1]
        with trio.fail_after(5), pytest.raises(ConnectionClosed) as closed:
            while True:  # what the socket held already, then the close
                await slow.next()
        assert closed.value.reason is not None and closed.value.reason.code == 4429, closed.value.reason
        rows = await _rows(running, stalled, 2)
        assert rows[1].tool == "bridge:close" and rows[1].outcome == "client_too_slow"


async def _sessions(running: Running) -> list[dict[str, Any]]:
    reply = await running.http(ALICE).request("GET", "/v1/bridge/sessions")
    sessions: list[dict[str, Any]] = reply.json()["sessions"]
    return sessions


class StalledSocket:
    """A client socket that takes no frame until ``reading`` is set."""

    def __init__(self) -> None:
        self.reading = trio.Event()
        self.written: list[str] = []
        self.closed: tuple[int, str] | None = None

    async def send(self, data: str) -> None:
        await self.reading.wait()
        self.written.append(data)

    async def receive(self) -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def close(self, code: int, reason: str = "") -> None:
        self.closed = (code, reason)


async def test_a_cut_off_client_is_sent_4429_next_and_nothing_it_fell_behind_on(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:

    monkeypatch.setattr("supervisor.bridge.link.RELAY_BUFFER_BYTES", 1000)
    socket = StalledSocket()
    hub: Any = SimpleNamespace(peers=PeerRegistry(None))  # type: ignore[arg-type]  # no session to record
    client = BridgeLink(hub, socket, None, "127.0.0.1:1", None)  # type: ignore[arg-type]  # no tokens used
    frames = [env.message("s", {"jsonrpc": "2.0", "method": "n", "params": {"i": i}}) for i in range(40)]
    with client.scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._write)
            client.relay(frames[0])
            await trio.sleep(1)  # the writer holds it, waiting for the socket
            for frame in frames[1:]:  # the rest queue until the bound
                client.relay(frame)
            assert client.shut_reason == "client_too_slow" and client.relayed_bytes <= 1000
            socket.reading.set()
            await trio.sleep_forever()  # until the writer has closed the socket and cancelled
    assert socket.written == [env.encode(frames[0])]
    assert socket.closed is not None and socket.closed[0] == 4429 and "too slow" in socket.closed[1]


async def test_a_senders_frame_is_written_in_its_own_task_and_none_after_a_cut_off(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """No hop through the writer on a round trip's path: ``send_text`` writes under the
    link's send lock in the caller's task; once the client is cut off it writes nothing."""

    monkeypatch.setattr("supervisor.bridge.link.RELAY_BUFFER_BYTES", 1000)
    socket = StalledSocket()
    socket.reading.set()
    writers: list[trio.lowlevel.Task] = []
    written = socket.send

    async def send(data: str) -> None:
        writers.append(trio.lowlevel.current_task())
        await written(data)

    socket.send = send  # type: ignore[method-assign]
    hub: Any = SimpleNamespace(peers=PeerRegistry(None))  # type: ignore[arg-type]  # no session to record
    client = BridgeLink(hub, socket, None, "127.0.0.1:1", None)  # type: ignore[arg-type]  # no tokens used
    with client.scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._write)
            await client.send_text("first")
            assert socket.written == ["first"] and writers == [trio.lowlevel.current_task()]
            socket.reading = trio.Event()  # the client stops reading: relayed frames pile up
            for i in range(40):
                client.relay(env.message("s", {"jsonrpc": "2.0", "method": "n", "params": {"i": i}}))
            assert client.shut_reason == "client_too_slow"
            socket.reading.set()
            await client.send_text("after the cut")
            await trio.sleep_forever()  # until the writer has closed the socket and cancelled
    assert "after the cut" not in socket.written
    assert socket.closed is not None and socket.closed[0] == 4429
