"""The bench's side of the bridge, for ``bench_bridge.py`` and ``bridge_peers.py``:
the envelope spoken by hand over trio-websocket (no client library in the measure),
and the ``serve`` subprocess as the bench sees it (its processes, descriptors, RSS)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import orjson
import trio
from trio_websocket import WebSocketConnection, open_websocket_url
from wsproto.utilities import LocalProtocolError

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import descendants, fds_and_rss  # noqa: E402

SERVER = [sys.executable, str(HERE / "minimal_server.py")]
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
SUBPROTOCOL = ["mcp-supervisor.bridge.v1"]


def call(i: int, text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}},
    }


# ----------------------------------------------------------------- our client


class Ours:
    """One socket to the hub; frames encoded and decoded with orjson, by hand."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws

    async def send(self, kind: str, data: dict[str, Any], frame_id: int | None = None) -> None:
        frame: dict[str, Any] = {"v": 1, "type": kind, "data": data}
        if frame_id is not None:
            frame["id"] = frame_id
        await self.ws.send_message(orjson.dumps(frame).decode())

    async def until(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            frame: dict[str, Any] = orjson.loads(await self.ws.get_message())
            if match(frame):
                return frame
            if frame["type"] in ("mcp:error", "mcp:session:close", "mcp:session:open:result"):
                raise RuntimeError(f"unexpected frame from the hub: {frame}")

    async def open(self, frame_id: int = 0, server: str = "mini") -> str:
        await self.send("mcp:session:open", {"serverName": server}, frame_id)
        answer = await self.until(
            lambda f: f["type"] == "mcp:session:open:result" and f.get("id") == frame_id
        )
        sid: str = answer["data"]["sessionId"]
        return sid

    async def rpc(self, sid: str, message: dict[str, Any]) -> dict[str, Any]:
        await self.send("mcp:message", {"sessionId": sid, "jsonrpc": message})
        rid = message["id"]
        frame = await self.until(
            lambda f: f["type"] == "mcp:message" and f["data"]["jsonrpc"].get("id") == rid
        )
        answer: dict[str, Any] = frame["data"]["jsonrpc"]
        return answer

    async def initialize(self, sid: str) -> None:
        await self.rpc(sid, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        await self.send(
            "mcp:message",
            {"sessionId": sid, "jsonrpc": {"jsonrpc": "2.0", "method": "notifications/initialized"}},
        )

    async def close(self, sid: str) -> None:
        await self.send("mcp:session:close", {"sessionId": sid}, 1)
        await self.until(lambda f: f["type"] == "mcp:session:close" and f["data"]["sessionId"] == sid)


@asynccontextmanager
async def ours_socket(url: str, connecting: trio.CapacityLimiter | None = None) -> AsyncIterator[Ours]:
    """A socket to the hub; ``connecting`` bounds how many are in their handshake at once."""
    try:
        async with contextlib.AsyncExitStack() as stack:
            async with connecting or contextlib.nullcontext():
                opening = open_websocket_url(url, subprotocols=SUBPROTOCOL, connect_timeout=120)
                ws = await stack.enter_async_context(opening)
            yield Ours(ws)
    except BaseException as exc:
        if not pong_race(exc):
            raise


def pong_race(exc: BaseException) -> bool:
    """trio-websocket#184: Hypercorn pings every socket as it is accepted, and a ping
    that crosses our close frame is answered with a pong wsproto refuses. The socket
    is going anyway; trio-websocket raises that (or a Cancelled naming it) from its
    close, after the body is done."""
    if isinstance(exc, BaseExceptionGroup):
        return all(pong_race(e) for e in exc.exceptions)
    return isinstance(exc, LocalProtocolError) or (
        isinstance(exc, trio.Cancelled) and "LocalProtocolError" in str(exc)
    )


def text_of(answer: dict[str, Any]) -> str:
    return "".join(item.get("text", "") for item in (answer.get("result") or {}).get("content", []))


async def drop(ws: WebSocketConnection) -> None:
    """Close the TCP connection with no WebSocket close handshake."""
    await ws._stream.aclose()


class Serve:
    """The ``serve`` subprocess and what the bench reads of it."""

    def __init__(self, port: int, pid: int, spares: int = 0) -> None:
        self.pid = pid
        self.spares = spares  # warm spares: processes of serve's that are no session's
        self.url = f"ws://127.0.0.1:{port}/v1/bridge"
        self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60)

    async def ready(self) -> None:
        for _ in range(400):
            with contextlib.suppress(httpx.TransportError):
                if (await self.http.get("/v1/health")).status_code == 200:
                    return
            await trio.sleep(0.05)
        raise RuntimeError("serve did not answer /v1/health in 20 s")

    async def settled(self, timeout_s: float = 60) -> float:
        """Wait until no bridge session is listed and no process is left but the warm
        spares; how long it took."""
        began = time.perf_counter()
        with trio.fail_after(timeout_s):
            while await self._busy():  # noqa: ASYNC110 - polling another process
                await trio.sleep(0.05)
        return time.perf_counter() - began

    async def _busy(self) -> bool:
        listed = (await self.http.get("/v1/bridge/sessions")).json()["sessions"]
        return bool(listed) or self.children() > self.spares

    def children(self) -> int:
        """The bridged servers' processes under ``serve``: not its other helpers (the
        journal's folder stays for the server's whole life, so counting it, settling
        never came)."""
        return sum(1 for pid in descendants(self.pid) if _runs_server(pid))

    def sample(self) -> dict[str, int]:
        fds, rss = fds_and_rss(self.pid)
        return {"fds": fds, "rss_kb": rss}


def _runs_server(pid: int) -> bool:
    """Whether process ``pid`` runs ``SERVER`` (False once it is gone)."""
    try:
        return SERVER[1].encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
