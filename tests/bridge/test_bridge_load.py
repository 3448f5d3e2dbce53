"""The bridge under load, on loopback: 50 concurrent sessions each with a process of
its own and not one message in a wrong session; 200 open/close cycles with clean
closes, abrupt socket drops and SIGKILLed processes, and not one process left."""

from __future__ import annotations

import contextlib
import os
import random
import signal
from pathlib import Path

import pytest
import trio
from trio_websocket import open_websocket_url

from actors.protocol import bridge_envelope as env
from supervisor.settings.model import BridgeSettings
from tests.support.admin import Running, wait_for
from tests.support.bridge import (
    Client,
    alive,
    children_of,
    connected,
    exported,
    hub_running,
    none_alive,
    ws_url,
)

pytestmark = pytest.mark.real_peer


async def _one_session(
    running: Running, index: int, seen: dict[int, list[env.Frame]], pids: dict[int, int]
) -> None:
    async with connected(running) as client:
        sid = await client.open("mini", frame_id=f"open-{index}")
        init = await client.initialize(sid, request_id=f"init-{index}")
        assert init["id"] == f"init-{index}"
        frames = seen.setdefault(index, [])
        for request_id in (index, str(index), f"s-{index}-x", 10_000 + index):
            text = f"session {index} request {request_id!r}"
            call = {"name": "echo", "arguments": {"text": text}}
            await client.send(
                env.message(sid, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call})
            )
            answer, before = await client.until(
                lambda f, rid=request_id: f.type == env.MESSAGE and f.data["jsonrpc"].get("id") == rid
            )
            frames.extend([*before, answer])
            assert type(answer.data["jsonrpc"]["id"]) is type(request_id)
            assert answer.data["jsonrpc"]["result"]["content"][0]["text"] == text
        listing = (await running.http().request("GET", "/v1/bridge/sessions")).json()["sessions"]
        (mine,) = [item for item in listing if item["session_id"] == sid]
        pids[index] = mine["pid"]
        frames.append(env.Frame("mine", {"sessionId": sid}))
        await client.send(env.session_close(sid, id="close"))
        closed, before = await client.until(lambda f: f.type == env.CLOSE)
        frames.extend(before)
        assert closed.data["sessionId"] == sid


async def test_fifty_concurrent_sessions_each_own_process_no_cross_talk(tmp_path: Path) -> None:
    seen: dict[int, list[env.Frame]] = {}
    pids: dict[int, int] = {}
    bridge = BridgeSettings(max_sessions_per_tenant=64)
    async with hub_running(tmp_path, exported("mini"), bridge=bridge) as running:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for index in range(50):
                    nursery.start_soon(_one_session, running, index, seen, pids)
    assert len(set(pids.values())) == 50  # a process per session
    wrong = []
    for index, frames in seen.items():
        sid = next(f.data["sessionId"] for f in frames if f.type == "mine")
        for frame in frames:
            if frame.type == env.MESSAGE and (
                frame.data["sessionId"] != sid or str(index) not in str(frame.data["jsonrpc"])
            ):
                wrong.append((index, frame))
    assert wrong == []
    await none_alive(list(pids.values()))


async def _cycle(running: Running, index: int, pids: list[int]) -> None:
    mode = index % 4
    url = ws_url(running)
    with contextlib.suppress(Exception):  # an abrupt drop breaks the client's own close
        async with open_websocket_url(url) as ws:
            client = Client(ws)
            sid = await client.open("mini", frame_id=index)
            listing = (await running.http().request("GET", "/v1/bridge/sessions")).json()["sessions"]
            pid = next(item["pid"] for item in listing if item["session_id"] == sid)
            pids.append(pid)
            if mode == 0:  # a clean close of the session, then of the socket
                await client.send(env.session_close(sid))
                await client.until(lambda f: f.type == env.CLOSE)
            elif mode == 1:  # the socket dropped with no close handshake
                await ws._stream.aclose()
            elif mode == 2:  # the process SIGKILLed: the client hears why, then leaves
                os.kill(pid, signal.SIGKILL)
                closed, _ = await client.until(lambda f: f.type == env.CLOSE)
                assert closed.data["reason"] == "server_exited"
            else:  # killed and the socket dropped at once
                os.kill(pid, signal.SIGKILL)
                await ws._stream.aclose()


async def test_two_hundred_cycles_leave_no_process(tmp_path: Path) -> None:
    pids: list[int] = []
    async with hub_running(tmp_path, exported("mini")) as running:
        with trio.fail_after(120):
            limiter = trio.CapacityLimiter(8)

            async def bounded(index: int) -> None:
                async with limiter:
                    await _cycle(running, index, pids)

            async with trio.open_nursery() as nursery:
                for index in random.Random(16).sample(range(200), 200):
                    nursery.start_soon(bounded, index)
            await wait_for(running.http(), "/v1/bridge/sessions", lambda body: body["sessions"] == [])
            assert running.sup.journal is not None
    assert len(pids) == 200 and len(set(pids)) == 200
    await none_alive(pids)
    assert not [pid for pid in children_of() if pid in set(pids)]
    assert not any(alive(pid) for pid in pids)
