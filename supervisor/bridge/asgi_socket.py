"""``/v1/bridge`` served at the ASGI level, in front of the Quart app (``bridge_front``).

Why: every frame through Quart's websocket machinery crosses a task of its own (its
receiver moves each message from Hypercorn's queue into a second queue the handler
reads) and Quart's wrappers and signals on both ways. For the bridge, whose round
trip is a frame each way, that was a measured share of the latency (see
``benchmarks/RESULTS.md``, the bridge's round 3). Here the link reads Hypercorn's ASGI
``receive`` and writes ``send`` itself, in its own tasks.

Nothing else changes for a client: the same ``gate`` decides before the upgrade
(``BridgeHandlers.bridge_verdict``), a refusal is the same JSON answer with the same
headers (``bridge_refusal``, sent as the ASGI websocket HTTP response, as Quart sends
it), the same subprotocol is echoed, and a link that ends without closing its socket
closes it with 1000, as Quart does. Everything that is not a WebSocket on exactly
``/v1/bridge`` goes to Quart: a plain GET of it is still the route's 426, and the
Quart route still serves the bridge for an app served without this front
(``tests/bridge/test_bridge_asgi.py`` runs both and compares what clients see).

A client that leaves (``websocket.disconnect``) cancels the link, as Quart cancels
its handler. The difference: Quart sees the disconnect at once in its receiver task,
here the link's reader sees it on its next read. The reader reads whenever it is not
handling a frame; when it stops for good (an ``auth`` refusal, a client cut off for
being too slow) the link's writer closes the socket and ends it within a bounded time.
"""

from __future__ import annotations

import trio
from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGISendCallable,
    Scope,
    WebsocketResponseBodyEvent,
    WebsocketScope,
)
from quart_trio import QuartTrio
from quart_trio.wrappers import TrioResponse

from actors.log_events import get_logger
from supervisor.admin.app import admin_api
from supervisor.bridge.gate import client_address
from supervisor.bridge.handlers import BridgeHandlers
from supervisor.bridge.link import BridgeLink
from supervisor.web.auth import Denial

log = get_logger("supervisor.bridge")

BRIDGE_PATH = "/v1/bridge"


class AsgiSocket:
    """The link's ``Socket`` over raw ASGI messages; a disconnect cancels ``gone``."""

    def __init__(self, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        self._receive = receive
        self._send = send
        self.gone = trio.CancelScope()
        self.closed = False

    async def receive(self) -> str | bytes:
        while True:
            message = await self._receive()
            if message["type"] == "websocket.receive":
                data: str | bytes | None = message.get("bytes") or message.get("text")
                return data if data is not None else ""
            if message["type"] == "websocket.disconnect":
                self.closed = True
                self.gone.cancel()
                await trio.lowlevel.checkpoint()  # raises Cancelled

    async def send(self, data: str) -> None:
        await self._send({"type": "websocket.send", "bytes": None, "text": data})

    async def close(self, code: int, reason: str = "") -> None:
        self.closed = True
        await self._send({"type": "websocket.close", "code": code, "reason": reason})


def bridge_front(app: QuartTrio, rest: ASGIFramework | None = None) -> ASGIFramework:
    """The ASGI app ``serve`` runs: ``/v1/bridge`` sockets here, the rest to ``rest``
    (``app`` itself by default)."""
    api = admin_api(app)
    inner = app if rest is None else rest

    async def front(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "websocket" and scope["path"] == BRIDGE_PATH:
            await _serve_socket(api, scope, receive, send)
        else:
            await inner(scope, receive, send)

    return front


async def _serve_socket(
    api: BridgeHandlers, scope: WebsocketScope, receive: ASGIReceiveCallable, send: ASGISendCallable
) -> None:
    if (await receive())["type"] != "websocket.connect":
        return  # gone before it was handled
    tokens = api.tokens()
    verdict = api.bridge_verdict(scope, tokens)
    if isinstance(verdict, Denial):
        await _refuse(api.bridge_refusal(verdict), send)
        return
    await send({"type": "websocket.accept", "subprotocol": verdict.subprotocol, "headers": []})
    socket = AsgiSocket(receive, send)
    try:
        with socket.gone:
            await BridgeLink(api.bridge_hub, socket, verdict.principal, client_address(scope), tokens).run()
    except Exception:
        log.exception("bridge socket failed", extra={"fields": {"client": client_address(scope)}})
    if not socket.closed:
        await socket.close(1000)


async def _refuse(response: TrioResponse, send: ASGISendCallable) -> None:
    """The refusal as Quart writes a handler's response to a socket not accepted."""
    headers = [(key.lower().encode(), value.encode()) for key, value in response.headers.items()]
    await send({"type": "websocket.http.response.start", "status": response.status_code, "headers": headers})
    body: WebsocketResponseBodyEvent = {
        "type": "websocket.http.response.body",
        "body": await response.get_data(as_text=False),
        "more_body": False,
    }
    await send(body)
