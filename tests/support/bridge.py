"""Helpers of the bridge hub's tests: the real Hypercorn-served admin app on loopback,
and a client over a real WebSocket (trio-websocket) that speaks the envelope."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from actors.protocol import bridge_envelope as env
from actors.protocol.bridge_envelope import Frame, FrameId
from actors.spec import ServerSpec
from supervisor.settings.model import AdminSettings, BridgeSettings, Config, TokenGrant
from tests.support.admin import MINI, Running, admin_running
from tests.support.paths import REPO

ROOT = REPO
EVERYTHING = ROOT / ".venv" / "node" / "node_modules" / ".bin" / "mcp-server-everything"
INIT_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"},
}


def exported(name: str, *command: str, **options: Any) -> ServerSpec:
    """A local server open to the bridge (mini_server.py unless ``command`` is given)."""
    options.setdefault("shutdown_grace_s", 0.5)
    options.setdefault("bridge", True)
    return ServerSpec(name=name, command=command or (sys.executable, MINI), **options)


@asynccontextmanager
async def hub_running(
    state_dir: Path,
    *specs: ServerSpec,
    tokens: Mapping[str, TokenGrant | str] | None = None,
    bridge: BridgeSettings | None = None,
) -> AsyncIterator[Running]:
    config = Config(
        servers=specs, admin=AdminSettings(tokens=dict(tokens or {})), bridge=bridge or BridgeSettings()
    )
    async with admin_running(config, state_dir) as running:
        yield running


def ws_url(running: Running) -> str:
    return bridge_url(running.url)


def bridge_url(admin_url: str) -> str:
    """The hub's ``ws://`` URL on the admin API's bind."""
    return admin_url.replace("http://", "ws://") + "/v1/bridge"


class Client:
    """One socket: frames out, frames in (decoded; a bad frame from the hub fails)."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws

    async def send(self, frame: Frame) -> None:
        await self.ws.send_message(env.encode(frame))

    async def next(self) -> Frame:
        decoded = env.decode(await self.ws.get_message(), 64 * 1024 * 1024)
        assert isinstance(decoded, Frame), decoded
        return decoded

    async def until(self, predicate: Callable[[Frame], bool]) -> tuple[Frame, list[Frame]]:
        """The first frame that matches, and the ones before it."""
        before = []
        while not predicate(frame := await self.next()):
            before.append(frame)
        return frame, before

    async def open(self, server: str, frame_id: FrameId = "open") -> str:
        await self.send(env.session_open(server, frame_id))
        answer, _ = await self.until(lambda f: f.type == env.OPEN_RESULT and f.id == frame_id)
        assert "sessionId" in answer.data, answer
        sid: str = answer.data["sessionId"]
        return sid

    async def rpc(self, sid: str, jsonrpc: dict[str, Any]) -> dict[str, Any]:
        """Send a request; its answer (same id), skipping what comes before it."""
        await self.send(env.message(sid, jsonrpc))
        answer, _ = await self.until(
            lambda f: (
                f.type == env.MESSAGE
                and f.data["jsonrpc"].get("id") == jsonrpc["id"]
                and "method" not in f.data["jsonrpc"]
            )
        )
        assert answer.data["sessionId"] == sid
        result: dict[str, Any] = answer.data["jsonrpc"]
        return result

    async def initialize(self, sid: str, request_id: FrameId = "init") -> dict[str, Any]:
        answer = await self.rpc(
            sid, {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": INIT_PARAMS}
        )
        await self.send(env.message(sid, {"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return answer


@asynccontextmanager
async def connected(running: Running, *, token: str | None = None, **options: Any) -> AsyncIterator[Client]:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    headers += options.pop("extra_headers", [])
    async with open_websocket_url(ws_url(running), extra_headers=headers, **options) as ws:
        yield Client(ws)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != b"Z"


async def none_alive(pids: list[int], timeout_s: float = 10.0) -> None:
    for _ in range(round(timeout_s / 0.02)):
        if not any(alive(pid) for pid in pids):
            return
        await trio.sleep(0.02)
    raise AssertionError(f"still alive after {timeout_s} s: {[pid for pid in pids if alive(pid)]}")


def children_of(pid: int = os.getpid()) -> list[int]:
    """Our live child processes (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != b"Z":
                found.append(int(entry))
    return found
