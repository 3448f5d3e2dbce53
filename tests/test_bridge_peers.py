"""Dial-out bridge peers on loopback: the real Hypercorn-served hub and real
``mcp-supervisor bridge`` subprocesses, each offering a mini_server of its own."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import trio

from actors.connection.schedule import ReconnectSchedule
from actors.protocol import bridge_envelope as env
from actors.transports.connector import TransportConnector
from supervisor.bridge.dialout import exported as exported_servers
from supervisor.bridge.dialout import run_peer
from supervisor.settings.loader import load_config
from supervisor.settings.model import BridgeSettings, Role, TokenGrant
from tests.bridge_support import (
    ROOT,
    Client,
    children_of,
    connected,
    exported,
    hub_running,
    none_alive,
    ws_url,
)
from tests.test_admin_support import ALICE, MINI, Running

PEER = "peer-token-0123456789ab"
TOKENS: dict[str, TokenGrant | str] = {ALICE: "alice", PEER: TokenGrant("edge", Role.PEER)}


def peer_config(tmp: Path, name: str, *flags: str) -> Path:
    path = tmp / f"{name}-{len(flags)}.json"
    server = {"command": [sys.executable, MINI, *flags], "bridge": True}
    path.write_text(json.dumps({"servers": {name: server}}))
    return path


@asynccontextmanager
async def peer_running(running: Running, config: Path) -> AsyncIterator[trio.Process]:
    """A ``mcp-supervisor bridge`` process, once it says it has registered."""
    argv = [sys.executable, "-m", "supervisor.cli", "bridge", "--hub", ws_url(running), "--token", PEER]
    argv += ["--config", str(config)]
    process = await trio.lowlevel.open_process(argv, cwd=ROOT, stderr=subprocess.PIPE)
    try:
        assert process.stderr is not None
        said = b""
        with trio.fail_after(15):
            while b"registered with the hub" not in said:
                chunk = await process.stderr.receive_some()
                assert chunk, said.decode(errors="replace")
                said += chunk
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


async def peers_of(running: Running) -> list[dict[str, Any]]:
    reply = await running.http(ALICE).request("GET", "/v1/bridge/peers")
    assert reply.status == 200, reply
    peers: list[dict[str, Any]] = orjson.loads(reply.body)["peers"]
    return peers


async def round_trip(client: Client, sid: str) -> None:
    await client.initialize(sid, request_id="init-1")
    call = {"name": "echo", "arguments": {"text": "through the peer"}}
    answer = await client.rpc(sid, {"jsonrpc": "2.0", "id": "call-☃", "method": "tools/call", "params": call})
    assert answer["id"] == "call-☃"
    assert answer["result"]["content"][0]["text"] == "through the peer"


async def test_a_session_reaches_a_peer_and_a_killed_peer_comes_back(tmp_path: Path) -> None:
    config = peer_config(tmp_path, "far-mini")
    one_each = BridgeSettings(max_sessions_per_tenant=1)
    async with (
        hub_running(tmp_path, exported("near"), tokens=TOKENS, bridge=one_each) as running,
        connected(running, token=ALICE) as client,
    ):
        async with peer_running(running, config) as peer:
            listed = await peers_of(running)
            assert [s["name"] for s in listed[0]["servers"]] == ["far-mini"] and listed[0]["sessions"] == 0
            sid = await client.open("far-mini", frame_id=41)
            await round_trip(client, sid)
            assert (await peers_of(running))[0]["sessions"] == 1
            reply = await running.http(ALICE).request("GET", "/v1/bridge/sessions")
            [listed_session] = orjson.loads(reply.body)["sessions"]
            assert listed_session["session_id"] == sid and listed_session["peer"].startswith("127.0.0.1:")
            assert listed_session["state"] == "open" and listed_session["messages_in"] == 3
            child = children_of(peer.pid)
            assert child, "the peer runs no process for the session"
            peer.send_signal(signal.SIGKILL)
            with trio.fail_after(3):  # well before any timeout: at once
                closed, _ = await client.until(lambda f: f.type == env.CLOSE)
            assert closed.data["sessionId"] == sid and closed.data["reason"] == "peer_gone"
            await none_alive(child)
            assert await peers_of(running) == []
        # Gone: an open of its server is refused, naming it.
        await client.send(env.session_open("far-mini", id="gone"))
        refusal, _ = await client.until(lambda f: f.type == env.OPEN_RESULT)
        assert (
            refusal.data["error"]["code"] == "not_exported" and "far-mini" in refusal.data["error"]["message"]
        )
        async with peer_running(running, config):
            sid = await client.open("far-mini", frame_id="again")
            await round_trip(client, sid)
            await client.send(env.session_open("far-mini", id="second"))  # over the tenant's bound
            bound, _ = await client.until(lambda f: f.type == env.OPEN_RESULT)
            assert bound.id == "second" and bound.data["error"]["code"] == "too_many_sessions", bound
            await client.send(env.session_close(sid, id="bye"))
            closed, _ = await client.until(lambda f: f.type == env.CLOSE and f.data["sessionId"] == sid)
            assert closed.id == "bye"
        # The hub's own exports are untouched by peers.
        near = await client.open("near")
        await client.initialize(near)


async def test_a_conflicting_digest_is_refused(tmp_path: Path) -> None:
    async with (
        hub_running(tmp_path, tokens=TOKENS) as running,
        peer_running(running, peer_config(tmp_path, "shared")),
    ):
        other = peer_config(tmp_path, "shared", "--tools", "3")  # another launch config
        argv = [
            sys.executable,
            "-m",
            "supervisor.cli",
            "bridge",
            "--hub",
            ws_url(running),
            "--token",
            PEER,
        ]
        with trio.fail_after(15):
            done = await trio.run_process(
                [*argv, "--config", str(other)], cwd=ROOT, capture_stderr=True, check=False
            )
        assert done.returncode == 1
        assert b"'shared'" in done.stderr and b"launch config" in done.stderr, done.stderr
        # The same config twice is the same server: a second peer may offer it.
        async with peer_running(running, peer_config(tmp_path, "shared")):
            assert [p["sessions"] for p in await peers_of(running)] == [0, 0]


async def test_a_dropped_peer_reconnects_on_its_schedule_and_registers_again(tmp_path: Path) -> None:
    """The hub drops the peer (its idle timeout, 0.5 s); the peer, in this process on
    the real clock, connects again after its schedule's delay and registers again."""
    specs = exported_by(peer_config(tmp_path, "far-mini"))
    times: list[float] = []
    third = trio.Event()

    def registered(names: list[str]) -> None:
        assert names == ["far-mini"]
        times.append(trio.current_time())
        if len(times) == 3:
            third.set()

    bridge = BridgeSettings(idle_s=0.5)
    async with hub_running(tmp_path, tokens=TOKENS, bridge=bridge) as running, trio.open_nursery() as nursery:
        connector = TransportConnector()
        await nursery.start(connector.run)
        schedule = ReconnectSchedule((0.2,))
        nursery.start_soon(
            partial(
                run_peer, ws_url(running), PEER, specs, connector, schedule=schedule, registered=registered
            )
        )
        with trio.fail_after(10):
            await third.wait()
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert all(0.6 <= gap < 3 for gap in gaps), gaps  # idle 0.5 s + the 0.2 s delay
        assert [p["servers"][0]["name"] for p in await peers_of(running)] in ([], ["far-mini"])
        nursery.cancel_scope.cancel()


def exported_by(config: Path) -> dict[str, Any]:
    return exported_servers(load_config(str(config)).servers)
