"""Golden answers of ``/v1/bridge``, byte for byte, before the web tier is rewritten.

One real ``mcp-supervisor serve`` (``golden_serve.Serve``; ``web`` is its
``bridge: true`` server) and two files under ``tests/golden/``:

- ``bridge_handshake.txt``: every answer before the upgrade, written and read as raw
  HTTP: the refusals (tokens, subprotocols, Origin, Host, target, a plain GET) and
  the heads of the upgrades accepted;
- ``bridge_frames.txt``: the frames of accepted sockets (trio-websocket, as the other
  bridge tests use), both ways and in order: a session opened on ``web``, an
  ``initialize`` and a ``tools/call`` through it, its close; the ``auth`` frame, right
  and wrong; and the ``mcp:error`` answers to bad input.

Re-record on purpose (and review the diff with the change):

    MCP_SUPERVISOR_UPDATE_GOLDENS=1 .venv/bin/python -m pytest tests/end_to_end/test_golden_bridge.py

Nothing here imports ``supervisor``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from tests.support.golden_config import ALICE, APP_ORIGIN, BOUND, DEEP, OPS, PEER
from tests.support.golden_files import Masker, show
from tests.support.golden_http import UPGRADE, http_request
from tests.support.golden_messages import INITIALIZE, INITIALIZED, rpc
from tests.support.golden_serve import Serve, serve

__all__ = ["serve"]  # the module's fixture

RERECORD = "tests/end_to_end/test_golden_bridge.py"
BRIDGE = "/v1/bridge"
SUBPROTOCOL = "mcp-supervisor.bridge.v1"
TOKEN_PREFIX = "mcp-supervisor.token."
WRONG = "wrong-token-0123456789"


def test_every_answer_before_the_upgrade(serve: Serve) -> None:
    out = serve.recorder(
        "bridge_handshake",
        "/v1/bridge before the upgrade: each refusal, and the head of each upgrade accepted\n"
        "(read, then the client hangs up).",
        RERECORD,
    )
    host = serve.authority

    def upgrade(title: str, *headers: tuple[str, str], target: str = BRIDGE, **how: Any) -> None:
        how.setdefault("host", host)
        raw = http_request("GET", target, how.pop("host"), headers=[*UPGRADE, *headers], **how)
        out.send(title, raw)

    bearer = ("Authorization", f"Bearer {ALICE}")
    upgrade("accepted: a bearer token", bearer)
    upgrade("accepted: no credential (an auth frame must follow)")
    upgrade("accepted: the token as a subprotocol", ("Sec-WebSocket-Protocol", f"{TOKEN_PREFIX}{ALICE}"))
    upgrade(
        "accepted: ours and the token offered, ours echoed",
        ("Sec-WebSocket-Protocol", f"{SUBPROTOCOL}, {TOKEN_PREFIX}{ALICE}"),
    )
    upgrade("accepted: an allowed Origin", bearer, ("Origin", APP_ORIGIN))
    upgrade("accepted: a loopback Origin", bearer, ("Origin", f"http://{host}"))
    upgrade("accepted: the operator role", ("Authorization", f"Bearer {OPS}"))
    upgrade("accepted: the peer role", ("Authorization", f"Bearer {PEER}"))
    upgrade(
        "accepted: permessage-deflate offered (and declined)",
        bearer,
        ("Sec-WebSocket-Extensions", "permessage-deflate"),
    )
    upgrade("a wrong token", ("Authorization", f"Bearer {WRONG}"))
    upgrade("a wrong token as a subprotocol", ("Sec-WebSocket-Protocol", f"{TOKEN_PREFIX}{WRONG}"))
    upgrade(
        "two token subprotocols",
        ("Sec-WebSocket-Protocol", f"{TOKEN_PREFIX}{ALICE}, {TOKEN_PREFIX}{PEER}"),
    )
    upgrade("not a bearer", ("Authorization", "Basic YWxpY2U6c2VjcmV0"))
    upgrade("a control character in the token", ("Authorization", f"Bearer {ALICE}\x01"))
    upgrade("an Origin not allowed", bearer, ("Origin", "https://evil.example"))
    upgrade("two Origins", ("Origin", APP_ORIGIN), ("Origin", APP_ORIGIN))
    upgrade("Origin null", ("Origin", "null"))
    upgrade("a foreign Host", bearer, host="evil.example")
    upgrade("two Hosts", ("Host", host))
    upgrade("a foreign absolute-form target", bearer, target="http://evil.example/v1/bridge")
    upgrade("a loopback absolute-form target", bearer, target=f"http://{host}/v1/bridge")
    upgrade("a quoted path", ("Origin", "https://evil.example"), target="/v1/%62ridge")
    upgrade("a trailing slash", bearer, target="/v1/bridge/")
    upgrade("a query string", bearer, target="/v1/bridge?x=1")
    no_key = [(name, value) for name, value in UPGRADE if name != "Sec-WebSocket-Key"]
    out.send("no Sec-WebSocket-Key", http_request("GET", BRIDGE, host, token=ALICE, headers=no_key))
    old = [(name, "8" if name == "Sec-WebSocket-Version" else value) for name, value in UPGRADE]
    out.send("Sec-WebSocket-Version 8", http_request("GET", BRIDGE, host, token=ALICE, headers=old))
    out.send("a plain GET", http_request("GET", BRIDGE, host, token=ALICE))
    out.send("a plain GET, no token", http_request("GET", BRIDGE, host))
    out.send("HTTP/1.0 GET", http_request("GET", BRIDGE, host, token=ALICE, version="1.0"))
    out.send("POST", http_request("POST", BRIDGE, host, token=ALICE, body=b"{}"))
    out.golden.check()


class Frames:
    """One socket's frames, as sent and as received, in order (shown as ``show`` shows
    a body)."""

    def __init__(self, ws: WebSocketConnection, lines: list[str], masker: Masker) -> None:
        self.ws = ws
        self.lines = lines
        self.masker = masker

    async def send(self, frame: Any) -> None:
        """A frame: a dict (as JSON text), or text or bytes as is."""
        data = json.dumps(frame) if isinstance(frame, dict) else frame
        await self.ws.send_message(data)
        shown = f"(binary) {show(data)}" if isinstance(data, bytes) else show(data.encode())
        self.lines.append(f">>> {shown}")

    async def receive(self) -> dict[str, Any]:
        text = await self.ws.get_message()
        assert isinstance(text, str), text
        self.lines.append(f"<<< {show(text.encode())}")
        frame: dict[str, Any] = json.loads(text)
        return frame

    async def round(self, frame: Any) -> dict[str, Any]:
        """Send ``frame``, read the answer."""
        await self.send(frame)
        return await self.receive()

    async def closed(self) -> None:
        """The socket's end, as the hub closes it."""
        try:
            extra = await self.ws.get_message()
        except ConnectionClosed as closed:
            reason = closed.reason
            assert reason is not None
            self.lines.append(f"--- closed by the hub: code {reason.code}, reason {reason.reason!r}")
        else:
            raise AssertionError(f"a frame instead of the close: {extra!r}")

    async def open(self, server: str, frame_id: Any) -> str:
        """A session of ``server``: its id (masked from now on)."""
        answer = await self.round(frame("mcp:session:open", frame_id, serverName=server))
        sid = str(answer["data"]["sessionId"])
        self.masker.name(sid, "bridge-session")
        return sid


def frame(kind: str, frame_id: Any = None, **data: Any) -> dict[str, Any]:
    """A well-formed frame of the envelope (``id`` left out when None)."""
    sent: dict[str, Any] = {"v": 1, "type": kind}
    if frame_id is not None:
        sent["id"] = frame_id
    return {**sent, "data": data} if data else sent


def message(sid: str, jsonrpc: Mapping[str, Any]) -> dict[str, Any]:
    return frame("mcp:message", sessionId=sid, jsonrpc=jsonrpc)


async def test_the_frames_of_accepted_sockets(serve: Serve) -> None:
    golden = serve.golden(
        "bridge_frames",
        "/v1/bridge sockets, frame by frame (>>> sent by the client, <<< by the hub), each read\n"
        "before the next is sent; <bridge-session-N> are the hub's session ids.",
        RERECORD,
    )
    url = f"ws://{serve.authority}{BRIDGE}"
    bearer = [(b"authorization", f"Bearer {ALICE}".encode())]

    sockets: list[tuple[str, Frames]] = []

    async def socket(title: str, *, headers: list[tuple[bytes, bytes]] = bearer, **how: Any) -> Frames:
        ws = await stack.enter_async_context(open_websocket_url(url, extra_headers=headers, **how))
        sockets.append((title, Frames(ws, [], golden.masker)))
        return sockets[-1][1]

    with trio.fail_after(20):
        async with AsyncExitStack() as stack:
            frames = await socket("a session on web: open, initialize, initialized, a call, close")
            sid = await frames.open("web", "open-1")
            await frames.round(message(sid, INITIALIZE))
            await frames.send(message(sid, INITIALIZED))
            call = rpc("c-2", "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
            await frames.round(message(sid, call))
            await frames.round(frame("mcp:session:close", "close-1", sessionId=sid))
            await frames.round(message(sid, rpc(3, "ping")))

            frames = await socket("bad input on an authenticated socket (it lives on)")
            for server in ("nope", "mini"):
                await frames.round(frame("mcp:session:open", server, serverName=server))
            await frames.round(message("no-such-session", rpc(1, "ping")))
            await frames.round("not json")
            await frames.round('{"v": 1, "type": "mcp:message", "data": ' + DEEP.decode() + "}")
            await frames.round("[1, 2]")
            await frames.round({"v": 2, "type": "mcp:session:open", "data": {"serverName": "web"}})
            await frames.round(frame("mcp:session:open", True, serverName="web"))
            await frames.round({"v": 1, "type": "mcp:session:open", "id": 7, "data": {}})
            await frames.round(
                {"v": 1, "type": "mcp:message", "id": 8, "data": {"sessionId": "x", "jsonrpc": 5}}
            )
            await frames.round(frame("mcp:nonsense", 9))
            await frames.round(frame("auth", 10, token=ALICE))
            await frames.round(b"\x00binary")
            await frames.round('{"v": 1, "type": "x", "data": "' + "a" * BOUND + '"}')
            sid = await frames.open("web", "still-alive")
            await frames.round(frame("mcp:session:close", "close-2", sessionId=sid))

            frames = await socket("no credential, then an auth frame", headers=[])
            await frames.send(frame("auth", "a", token=ALICE))
            sid = await frames.open("web", "after-auth")
            await frames.round(frame("mcp:session:close", "close-3", sessionId=sid))

            frames = await socket("no credential, then a wrong auth frame", headers=[])
            await frames.round(frame("auth", "a", token=WRONG))
            await frames.closed()

            frames = await socket("no credential, then another frame first", headers=[])
            await frames.round(frame("mcp:session:open", 1, serverName="web"))
            await frames.closed()

            frames = await socket(
                "the token as a subprotocol", headers=[], subprotocols=[f"{TOKEN_PREFIX}{ALICE}"]
            )
            frames.lines.append(f"--- subprotocol {frames.ws.subprotocol!r}")
            await frames.round(frame("mcp:session:open", "n", serverName="nope"))

            frames = await socket(
                "the peer role opens a session", headers=[(b"authorization", f"Bearer {PEER}".encode())]
            )
            await frames.round(frame("mcp:session:open", "p", serverName="web"))
    for title, frames in sockets:
        golden.case(title, ("--- frames", "\n".join(frames.lines)))
    golden.check()
