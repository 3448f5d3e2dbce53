"""``/v1/bridge``'s app (``supervisor/bridge/asgi_app.py``) as a client meets it: the
status of everything the gate refuses before the upgrade (the bytes of each answer are
pinned by ``tests/golden/bridge_handshake.txt``), the upgrade, and on an accepted socket
the auth frame, bad frames and a client that leaves."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from trio_websocket import ConnectionClosed, open_websocket_url

from actors.protocol import bridge_envelope as env
from supervisor.bridge.gate import SUBPROTOCOL, TOKEN_PREFIX
from supervisor.settings.model import BridgeSettings, Role, TokenGrant
from tests.support.bridge import Client, exported, hub_running, ws_url

ALICE = "alice-token-0123456789"
PEER = "peer-token-0123456789ab"
TOKENS: dict[str, TokenGrant | str] = {ALICE: "alice", PEER: TokenGrant("edge", Role.PEER)}
APP = "https://app.example"
UPGRADE = (
    "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
)


def _request(
    target: str = "/v1/bridge", headers: str = "", *, host: str = "HOST", upgrade: bool = True
) -> str:
    return f"GET {target} HTTP/1.1\r\nHost: {host}\r\n{UPGRADE if upgrade else ''}{headers}\r\n"


# What a client may send before the upgrade.
REQUESTS = {
    "bad token": _request(headers="Authorization: Bearer wrong-token-0123456789\r\n"),
    "bad token subprotocol": _request(
        headers=f"Sec-WebSocket-Protocol: {TOKEN_PREFIX}wrong-token-0123456789\r\n"
    ),
    "two token subprotocols": _request(
        headers=f"Sec-WebSocket-Protocol: {TOKEN_PREFIX}{ALICE}, {TOKEN_PREFIX}{PEER}\r\n"
    ),
    "origin not allowed": _request(
        headers=f"Authorization: Bearer {ALICE}\r\nOrigin: https://evil.example\r\n"
    ),
    "two origins": _request(headers=f"Origin: {APP}\r\nOrigin: {APP}\r\n"),
    "null origin": _request(headers="Origin: null\r\n"),
    "foreign host": _request(headers=f"Authorization: Bearer {ALICE}\r\n", host="evil.example"),
    "two hosts": _request(headers="Host: HOST\r\n"),
    "absolute target": _request("http://evil.example/v1/bridge", f"Authorization: Bearer {ALICE}\r\n"),
    "not a bearer": _request(headers="Authorization: Basic YWxpY2U6c2VjcmV0\r\n"),
    "plain GET": _request(headers=f"Authorization: Bearer {ALICE}\r\n", upgrade=False),
    "no key": _request(headers=f"Authorization: Bearer {ALICE}\r\n").replace("Sec-WebSocket-Key", "X-Key"),
    "quoted path": _request("/v1/%62ridge", "Origin: https://evil.example\r\n"),
    "accepted, ours echoed": _request(
        headers=f"Sec-WebSocket-Protocol: {SUBPROTOCOL}, {TOKEN_PREFIX}{ALICE}\r\nOrigin: {APP}\r\n"
    ),
    "accepted, token echoed": _request(headers=f"Sec-WebSocket-Protocol: {TOKEN_PREFIX}{ALICE}\r\n"),
    "accepted, no credential": _request(),
    "accepted, deflate offered": _request(
        headers=f"Authorization: Bearer {ALICE}\r\nSec-WebSocket-Extensions: permessage-deflate\r\n"
    ),
}


async def _exchange(port: int, raw: str) -> bytes:
    """Send ``raw`` and read the answer's head and body (or the head of a 101)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(raw.replace("HOST", f"127.0.0.1:{port}").encode("latin-1"))
        data = b""
        while b"\r\n\r\n" not in data or not _complete(data):
            chunk = await stream.receive_some()
            if not chunk:
                break
            data += chunk
    return data


def _complete(data: bytes) -> bool:
    head, _, body = data.partition(b"\r\n\r\n")
    if head.startswith(b"HTTP/1.1 101"):
        return True
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            return len(body) >= int(value)
    return False


def _without_date(answer: bytes) -> bytes:
    head, sep, body = answer.partition(b"\r\n\r\n")
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"date:")]
    return b"\r\n".join(lines) + sep + body


async def _answers(tmp_path: Path) -> dict[str, bytes]:
    bridge = BridgeSettings(allowed_origins=(APP,))
    async with hub_running(tmp_path, exported("mini"), tokens=TOKENS, bridge=bridge) as running:
        port = int(running.url.rsplit(":", 1)[1])
        with trio.fail_after(20):
            return {name: _without_date(await _exchange(port, raw)) for name, raw in REQUESTS.items()}


async def test_every_handshake_gets_its_answer(tmp_path: Path) -> None:
    front = await _answers(tmp_path)
    statuses = {name: front[name].split(b" ", 2)[1].decode() for name in REQUESTS}
    assert statuses == {
        "bad token": "401",
        "bad token subprotocol": "401",
        "two token subprotocols": "400",
        "origin not allowed": "403",
        "two origins": "403",
        "null origin": "403",
        "foreign host": "403",
        "two hosts": "400",
        "absolute target": "403",
        "not a bearer": "401",
        "plain GET": "426",
        "no key": "400",
        "quoted path": "403",
        "accepted, ours echoed": "101",
        "accepted, token echoed": "101",
        "accepted, no credential": "101",
        "accepted, deflate offered": "101",
    }
    # Offered permessage-deflate is declined (its zlib runs in the event loop, per frame).
    assert b"sec-websocket-extensions" not in front["accepted, deflate offered"].lower()
    assert b"application/json" in front["origin not allowed"]
    assert b"bridge.allowed_origins" in front["origin not allowed"]


async def test_an_accepted_socket(tmp_path: Path) -> None:
    """The auth frame, its refusal (4401), a bad frame answered with the socket alive, an
    oversized one, and a client that leaves: its session is closed."""
    bridge = BridgeSettings(max_message_bytes=4096)
    async with hub_running(tmp_path, exported("mini"), tokens=TOKENS, bridge=bridge) as running:
        url = ws_url(running)
        with trio.fail_after(15):
            async with open_websocket_url(url) as ws:
                client = Client(ws)
                await client.send(env.session_open("mini", id=1))
                error = await client.next()
                assert error.type == env.ERROR and error.data["code"] == "unauthorized"
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.get_message()
                assert closed.value.reason.code == 4401
            async with open_websocket_url(url) as ws:
                client = Client(ws)
                await client.send(env.auth(ALICE))
                await ws.send_message("not json")
                assert (await client.next()).data["code"] == env.MALFORMED
                await ws.send_message('{"v": 1, "type": "x", "data": "' + "a" * 5000 + '"}')
                assert (await client.next()).data["code"] == env.TOO_LARGE
                await ws.send_message(b"\x00binary")
                assert (await client.next()).type == env.ERROR
                sid = await client.open("mini")
                assert (await client.initialize(sid))["result"]["serverInfo"]["name"]
            # The socket left with its session open: the hub closes it.
            http = running.http(ALICE)
            for _ in range(200):
                if (await http.request("GET", "/v1/bridge/sessions")).json()["sessions"] == []:
                    break
                await trio.sleep(0.05)
            else:
                raise AssertionError("the session of a closed socket is still listed")


@pytest.mark.parametrize("target", ["/v1/bridge/", "/v1/nowhere", "/mcp"])
async def test_an_upgrade_to_a_path_without_a_socket_is_refused_cleanly(
    tmp_path: Path, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An untrusted client's upgrade to a path with no WebSocket gets the admin API's
    error answer, not a 500, and leaves no traceback in the log."""
    async with hub_running(tmp_path, exported("mini"), tokens=TOKENS) as running:
        port = int(running.url.rsplit(":", 1)[1])
        with trio.fail_after(20):
            answer = await _exchange(port, _request(target, f"Authorization: Bearer {ALICE}\r\n"))
    status = answer.split(b" ", 2)[1]
    assert status in (b"404", b"405", b"426"), answer
    assert b"Traceback" not in caplog.text.encode() and "RuntimeError" not in caplog.text
