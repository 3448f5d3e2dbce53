"""Dial-out bridge peers on loopback: the real Hypercorn-served hub and real
``mcp-supervisor bridge`` subprocesses, each offering a mini_server of its own."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import random
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from trio_websocket import ConnectionClosed

from actors.connection.schedule import ReconnectSchedule, jittered
from actors.log_events import event_name, record_fields
from actors.protocol import bridge_envelope as env
from actors.transports.connector import TransportConnector
from supervisor.bridge import dialout
from supervisor.bridge.dialout import exported as exported_servers
from supervisor.bridge.dialout import run_peer
from supervisor.settings.loader import load_config
from supervisor.settings.model import BridgeSettings, Role, TokenGrant
from tests.support.admin import ALICE, MINI, Running
from tests.support.bridge import (
    ROOT,
    Client,
    children_of,
    connected,
    exported,
    hub_running,
    none_alive,
    ws_url,
)

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


class Proxy:
    """A loopback TCP forwarder whose connections the test can cut (a network drop:
    neither side gets a WebSocket close)."""

    def __init__(self, target: str) -> None:
        self.target = target  # ws://127.0.0.1:PORT/...
        self.url = ""
        self._open: set[trio.CancelScope] = set()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        [listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listener.socket.getsockname()[1]
        self.url = re.sub(r":\d+/", f":{port}/", self.target, count=1)
        task_status.started()
        await trio.serve_listeners(self._forward, [listener])

    async def _forward(self, down: trio.SocketStream) -> None:
        up = await trio.open_tcp_stream("127.0.0.1", int(self.target.split(":")[2].split("/")[0]))
        with trio.CancelScope() as scope:
            self._open.add(scope)
            async with trio.open_nursery() as pipes:
                pipes.start_soon(_pipe, down, up, pipes.cancel_scope)
                pipes.start_soon(_pipe, up, down, pipes.cancel_scope)
        self._open.discard(scope)
        with trio.CancelScope(shield=True):
            await up.aclose()
            await down.aclose()

    def cut(self) -> None:
        for scope in self._open:
            scope.cancel()


async def _pipe(source: trio.SocketStream, sink: trio.SocketStream, done: trio.CancelScope) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        async for chunk in source:
            await sink.send_all(chunk)
    done.cancel()


class Registrations:
    """``run_peer``'s ``registered``: the names and the time of each registration."""

    def __init__(self) -> None:
        self.names: list[list[str]] = []
        self.times: list[float] = []
        self._next = trio.Event()

    def __call__(self, names: list[str]) -> None:
        self.names.append(names)
        self.times.append(trio.current_time())
        self._next.set()

    async def next(self) -> None:
        """Until the next registration (within 10 s)."""
        with trio.fail_after(10):
            await self._next.wait()
        self._next = trio.Event()


async def start_peer(
    nursery: trio.Nursery,
    url: str,
    specs: dict[str, Any],
    schedule: ReconnectSchedule,
    *,
    token: str = PEER,
    registered: Registrations | None = None,
) -> None:
    """``run_peer`` in this process (its own connector), in ``nursery``."""
    connector = TransportConnector()
    await nursery.start(connector.run)
    told = registered if registered is not None else Registrations()
    nursery.start_soon(partial(run_peer, url, token, specs, connector, schedule=schedule, registered=told))


async def registered_across_drops(
    nursery: trio.Nursery, running: Running, specs: dict[str, Any], delay_s: float, times: int
) -> tuple[Registrations, str]:
    """A peer dialling through a ``Proxy`` that is cut after each registration, ``times``
    times; its registrations and the URL it dialled."""
    registered = Registrations()
    proxy = Proxy(ws_url(running))
    await nursery.start(proxy.run)
    await start_peer(nursery, proxy.url, specs, ReconnectSchedule((delay_s,)), registered=registered)
    for _ in range(times):
        await registered.next()
        proxy.cut()
    return registered, proxy.url


async def test_a_dropped_peer_reconnects_on_its_schedule_and_registers_again(tmp_path: Path) -> None:
    """The connection drops (a proxy between peer and hub is cut); the peer, in this
    process on the real clock, connects again after its schedule's delay and registers
    again."""
    specs = exported_by(peer_config(tmp_path, "far-mini"))
    async with hub_running(tmp_path, tokens=TOKENS) as running, trio.open_nursery() as nursery:
        registered, _ = await registered_across_drops(nursery, running, specs, 0.2, 3)
        nursery.cancel_scope.cancel()
    assert registered.names == [["far-mini"]] * 3
    gaps = [later - earlier for earlier, later in itertools.pairwise(registered.times)]
    assert len(gaps) == 2 and all(0.2 <= gap < 3 for gap in gaps), gaps  # the 0.2 s delay


async def test_a_peer_that_cannot_reach_its_hub_dials_again_at_jittered_delays(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On the default schedule (about 1, 2, 5, 15, 60 s), each delay moved by up to a
    tenth by its draw, so peers cut off together do not all dial in one instant; the
    log says each delay."""
    dials: list[float] = []

    @asynccontextmanager
    async def refused(url: str, **options: Any) -> AsyncIterator[None]:
        dials.append(trio.current_time())
        raise OSError("connection refused")
        yield

    monkeypatch.setattr(dialout, "open_websocket_url", refused)
    with trio.move_on_after(150):
        await run_peer(
            "ws://hub.invalid/v1/bridge", PEER, {}, TransportConnector(), draw=random.Random(9).random
        )
    seeded = random.Random(9)
    expected = [jittered(delay, 0.1, seeded.random()) for delay in (1.0, 2.0, 5.0, 15.0, 60.0, 60.0)]
    assert [later - earlier for earlier, later in itertools.pairwise(dials)] == pytest.approx(expected)
    said = [
        record_fields(r) for r in caplog.records if event_name(r) == "bridge peer: not connected to the hub"
    ]
    assert [fields["retry_in_s"] for fields in said][:6] == pytest.approx(expected, abs=1e-3)
    assert said[0]["error"] == "connection refused"


async def test_a_registered_peer_is_never_idle(tmp_path: Path) -> None:
    """The hub keeps a registered peer that has no session past ``bridge.idle_s``
    (a client socket with nothing to do is closed meanwhile)."""
    specs = exported_by(peer_config(tmp_path, "far-mini"))
    registered = Registrations()
    bridge = BridgeSettings(idle_s=0.2)
    async with hub_running(tmp_path, tokens=TOKENS, bridge=bridge) as running, trio.open_nursery() as nursery:
        await start_peer(nursery, ws_url(running), specs, ReconnectSchedule((0.05,)), registered=registered)
        async with connected(running, token=ALICE) as idle_client:
            await registered.next()
            with trio.fail_after(5), pytest.raises(ConnectionClosed) as closed:
                await idle_client.next()
            assert closed.value.reason is not None and closed.value.reason.code == 4408
        await trio.sleep(0.6)  # three times idle_s, and then some
        times = registered.names
        assert len(times) == 1, f"the peer was dropped and registered {len(times)} times"
        assert [p["servers"][0]["name"] for p in await peers_of(running)] == ["far-mini"]
        nursery.cancel_scope.cancel()


def exported_by(config: Path) -> dict[str, Any]:
    return exported_servers(load_config(str(config)).servers)


def _peer_log(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "supervisor.bridge.peer" and r.levelno == level]


@pytest.mark.parametrize(
    ("token", "hub_said"),
    [
        ("not-a-token-0123456789", "HTTP 401: the hub does not know this token"),
        (ALICE, "mcp:peer:register needs the peer role; this token has the tenant role"),
    ],
)
async def test_a_refused_token_is_one_clear_error_tried_again_at_the_last_delay(
    tmp_path: Path,
    thread_safe_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    token: str,
    hub_said: str,
) -> None:
    """A wrong token (401 before the upgrade) or one of another role (the register is
    refused ``forbidden``): not the short schedule and a raw response each time, but
    one error naming the hub and the role needed, and an attempt every last delay."""
    caplog.set_level(logging.INFO, logger="supervisor.bridge.peer")
    attempts: list[float] = []
    fourth = trio.Event()
    dial = dialout.open_websocket_url

    def counted(*args: Any, **kwargs: Any) -> Any:
        attempts.append(trio.current_time())
        if len(attempts) == 4:
            fourth.set()
        return dial(*args, **kwargs)

    monkeypatch.setattr(dialout, "open_websocket_url", counted)
    specs = exported_by(peer_config(tmp_path, "far-mini"))
    async with hub_running(tmp_path, tokens=TOKENS) as running, trio.open_nursery() as nursery:
        url = ws_url(running)
        await start_peer(nursery, url, specs, ReconnectSchedule((1.0, 2.0, 60.0)), token=token)
        with trio.fail_after(300):
            await fourth.wait()
        nursery.cancel_scope.cancel()
    gaps = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    assert all(60 <= gap < 61 for gap in gaps), gaps
    (error,) = _peer_log(caplog, logging.ERROR)
    assert "peer role" in error.getMessage()
    assert error.fields == {"hub": url, "hub_said": hub_said, "retry_every_s": 60.0}  # type: ignore[attr-defined]
    assert _peer_log(caplog, logging.WARNING) == []  # no raw response, no headers
    assert token not in caplog.text


async def test_a_name_the_hub_exports_itself_is_registered_as_shadowed_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The hub's own ``web`` keeps being used first; the register result says so, and the
    peer warns once, not again when it registers again after a drop."""
    caplog.set_level(logging.INFO, logger="supervisor.bridge.peer")
    specs = exported_by(peer_config(tmp_path, "web"))
    async with (
        hub_running(tmp_path, exported("web"), tokens=TOKENS) as running,
        trio.open_nursery() as nursery,
    ):
        async with connected(running, token=PEER) as peer:  # the result, as the hub sends it
            await peer.send(env.peer_register([("web", "d" * 64), ("far", "e" * 64)], id="r"))
            result = await peer.next()
            assert result.data == {"servers": ["far", "web"], "shadowed": ["web"]}
        registered, url = await registered_across_drops(nursery, running, specs, 0.05, 2)
        async with connected(running, token=ALICE) as client:
            sid = await client.open("web")
            listed = (await running.http(ALICE).request("GET", "/v1/bridge/sessions")).json()["sessions"]
            assert [(s["session_id"], s["peer"]) for s in listed] == [(sid, "local")]  # the hub's own
        nursery.cancel_scope.cancel()
    # Cut twice, the peer registered at least twice more (a third may land before the
    # cancel: the proxy passes it): every registration names web, the warning is once.
    assert len(registered.names) >= 2 and all(names == ["web"] for names in registered.names)
    (warning,) = _peer_log(caplog, logging.WARNING)
    assert "uses its own first" in warning.getMessage()
    assert warning.fields == {"hub": url, "servers": "web"}  # type: ignore[attr-defined]
