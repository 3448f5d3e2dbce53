"""A bridged server that stops reading its stdin closes its own session and holds up
nothing else: not a dial-out peer's reader (which serves every client of the peer),
not a client's socket (which carries its other sessions). Real hub, real
``mcp-supervisor bridge`` peer, real mini_server processes (``--stop-reading``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

from actors.protocol import bridge_envelope as env
from tests.bridge.test_bridge_peers import TOKENS, peer_running, round_trip
from tests.support.admin import ALICE, MINI
from tests.support.bridge import Client, connected, exported, hub_running

CHUNK = 200 * 1024  # one message's argument
FLOOD = 80  # 16 MiB: more than the bound (8 MiB), the pipe, and the old 64-message queue


def _two_servers(tmp: Path) -> Path:
    """A peer's config: ``far-mini`` and ``far-stops`` (which stops reading after initialize)."""
    path = tmp / "peer.json"
    servers = {
        "far-mini": {"command": [sys.executable, MINI], "bridge": True},
        "far-stops": {"command": [sys.executable, MINI, "--stop-reading"], "bridge": True},
    }
    path.write_text(json.dumps({"servers": servers}))
    return path


async def _one_stalls_the_other_goes_on(
    stalled_client: Client, other: Client, servers: tuple[str, str]
) -> None:
    """Open a session of each server (the first stops reading after initialize), send
    the first FLOOD big messages, and see it closed, and the second answer after."""
    with trio.fail_after(20):
        stalled = await stalled_client.open(servers[0], "stalled")
        await stalled_client.initialize(stalled)
        steady = await other.open(servers[1], "steady")
        for n in range(FLOOD):
            params = {"name": "echo", "arguments": {"text": "x" * CHUNK}}
            call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
            await stalled_client.send(env.message(stalled, call))
        closed, _ = await stalled_client.until(
            lambda f: f.type == env.CLOSE and f.data["sessionId"] == stalled
        )
    assert closed.data["reason"] == "server_not_reading", closed
    assert "stopped reading its input" in closed.data["message"]
    with trio.fail_after(5):  # the reader was never held up: the other session answers
        await round_trip(other, steady)


async def test_a_peer_server_that_stops_reading_is_closed_and_the_peer_goes_on(tmp_path: Path) -> None:
    async with (
        hub_running(tmp_path, tokens=TOKENS) as running,
        peer_running(running, _two_servers(tmp_path)),
        connected(running, token=ALICE) as stalled_client,
        connected(running, token=ALICE) as other,
    ):
        await _one_stalls_the_other_goes_on(stalled_client, other, ("far-stops", "far-mini"))


async def test_a_local_server_that_stops_reading_is_closed_and_the_socket_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("supervisor.bridge.stdin_feed.STDIN_BUFFER_BYTES", 1024 * 1024)
    stops = exported("stops", sys.executable, MINI, "--stop-reading")
    async with (
        hub_running(tmp_path, stops, exported("mini"), tokens=TOKENS) as running,
        connected(running, token=ALICE) as client,
    ):
        await _one_stalls_the_other_goes_on(client, client, ("stops", "mini"))
    # Said once, however many of the client's lines reach the closing session.
    said = [r for r in caplog.records if "stopped reading its input" in r.getMessage()]
    assert len(said) == 1, len(said)
