"""Who may open a bridge socket, on the wire: the token in Authorization, as a
subprotocol or in a first auth frame; refusals for no token, a bad token, a role
that may not, and an origin that is not allowed. The gate's rules as a table too."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from trio.testing import MockClock
from trio_websocket import ConnectionClosed, ConnectionRejected, open_websocket_url

from actors.protocol import bridge_envelope as env
from supervisor.bridge.gate import SUBPROTOCOL, TOKEN_PREFIX, Admit, admit
from supervisor.settings.model import BridgeSettings, Role, TokenGrant
from supervisor.web.auth import Denial, TokenBook
from tests.support.admin import wait_for
from tests.support.bridge import Client, connected, exported, hub_running, ws_url

ALICE = "alice-token-0123456789"
PEER = "peer-token-0123456789ab"
TOKENS: dict[str, TokenGrant | str] = {ALICE: "alice", PEER: TokenGrant("edge", Role.PEER)}
APP = "https://app.example"


async def _rejected(url: str, **options: object) -> ConnectionRejected:
    with pytest.raises(ConnectionRejected) as caught:
        async with open_websocket_url(url, **options):  # type: ignore[arg-type]
            pass
    return caught.value


async def test_the_three_ways_to_present_a_token(tmp_path: Path) -> None:
    async with hub_running(tmp_path, exported("mini"), tokens=TOKENS) as running:
        url = ws_url(running)
        with trio.fail_after(10):
            async with connected(running, token=ALICE) as client:  # Authorization
                await client.open("mini")
                (item,) = (await running.http(ALICE).request("GET", "/v1/bridge/sessions")).json()["sessions"]
                assert item["tenant"] == "alice"
            offered = [SUBPROTOCOL, TOKEN_PREFIX + ALICE]
            async with open_websocket_url(url, subprotocols=offered) as ws:  # subprotocol
                assert ws.subprotocol == SUBPROTOCOL  # the token is never echoed back
                await Client(ws).open("mini")
            async with open_websocket_url(url, subprotocols=[TOKEN_PREFIX + ALICE]) as ws:
                assert ws.subprotocol == TOKEN_PREFIX + ALICE  # all it offered: echoed
            async with open_websocket_url(url) as ws:  # a first auth frame
                client = Client(ws)
                await client.send(env.auth(ALICE))
                await client.open("mini")


async def test_refusals(tmp_path: Path) -> None:
    bridge = BridgeSettings(allowed_origins=(APP,))
    async with hub_running(tmp_path, exported("mini"), tokens=TOKENS, bridge=bridge) as running:
        url = ws_url(running)
        with trio.fail_after(10):
            bad = await _rejected(url, extra_headers=[(b"authorization", b"Bearer wrong-token-0123456789")])
            assert bad.status_code == 401 and b"not valid" in (bad.body or b"")
            bad = await _rejected(url, subprotocols=[TOKEN_PREFIX + "wrong-token-0123456789"])
            assert bad.status_code == 401
            # A peer token is admitted (to register), but may not open sessions.
            async with open_websocket_url(
                url, extra_headers=[(b"authorization", f"Bearer {PEER}".encode())]
            ) as ws:
                await Client(ws).send(env.session_open("mini", id=7))
                refusal = await Client(ws).next()
                assert refusal.type == env.ERROR and refusal.data["code"] == "unknown_type", refusal
            origin = [(b"authorization", f"Bearer {ALICE}".encode()), (b"origin", b"https://evil.example")]
            wrong = await _rejected(url, extra_headers=origin)
            assert wrong.status_code == 403 and b"bridge.allowed_origins" in (wrong.body or b"")
            for allowed in (APP, "http://localhost:5173"):
                headers = [(b"authorization", f"Bearer {ALICE}".encode()), (b"origin", allowed.encode())]
                async with open_websocket_url(url, extra_headers=headers) as ws:
                    await Client(ws).open("mini")
            # No token at all: accepted, but the first frame must be auth.
            for first in (env.session_open("mini", id=1), env.auth("wrong-token-0123456789")):
                async with open_websocket_url(url) as ws:
                    client = Client(ws)
                    await client.send(first)
                    error = await client.next()
                    assert error.type == env.ERROR and error.data["code"] == "unauthorized"
                    with pytest.raises(ConnectionClosed) as closed:
                        await ws.get_message()
                    assert closed.value.reason.code == 4401
            # The sessions of the sockets above end with them; none was opened unauthenticated.
            await wait_for(running.http(ALICE), "/v1/bridge/sessions", lambda body: body["sessions"] == [])


async def test_an_auth_frame_must_come_in_time(tmp_path: Path, autojump_clock: MockClock) -> None:
    hub = hub_running(tmp_path, exported("mini"), tokens=TOKENS)
    async with hub as running, open_websocket_url(ws_url(running)) as ws:
        start = trio.current_time()
        error = env.decode(await ws.get_message())
        assert isinstance(error, env.Frame) and error.data["code"] == "unauthorized"
        assert "within 10 s" in error.data["message"] and trio.current_time() - start < 11


def _admit(**overrides: object) -> Admit | Denial:
    arguments: dict[str, object] = {
        "hosts": ["127.0.0.1:8765"],
        "origins": [],
        "authorizations": [],
        "subprotocols": [],
        "tokens": TokenBook({ALICE: TokenGrant("alice"), PEER: TokenGrant("edge", Role.PEER)}),
        "allowed_origins": (APP,),
        "bind_is_loopback": True,
    }
    return admit(**{**arguments, **overrides})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, "auth-frame"),
        ({"authorizations": [f"Bearer {ALICE}"]}, "alice"),
        ({"subprotocols": [SUBPROTOCOL, TOKEN_PREFIX + ALICE]}, "alice"),
        ({"subprotocols": [TOKEN_PREFIX + ALICE, TOKEN_PREFIX + PEER]}, 400),
        ({"authorizations": ["Bearer nope-nope-nope-nope"]}, 401),
        ({"authorizations": [f"Bearer {PEER}"]}, "edge"),  # a peer, to register
        ({"hosts": ["evil.example"], "authorizations": [f"Bearer {ALICE}"]}, 403),
        ({"origins": ["null"]}, 403),
        ({"origins": [APP, APP]}, 403),
        ({"origins": ["HTTPS://APP.EXAMPLE"], "authorizations": [f"Bearer {ALICE}"]}, "alice"),
        ({"origins": ["http://127.0.0.1:3000"]}, "auth-frame"),
    ],
)
def test_the_gate_as_a_table(overrides: dict[str, object], expected: object) -> None:
    verdict = _admit(**overrides)
    if isinstance(expected, int):
        assert isinstance(verdict, Denial) and verdict.status == expected, verdict
    elif expected == "auth-frame":
        assert verdict == Admit(None, None)
    else:
        assert isinstance(verdict, Admit) and verdict.principal is not None
        assert verdict.principal.tenant == expected
