"""``/v1/bridge`` as ONE ASGI app, with no framework.

Why at the ASGI level: every frame through a framework's WebSocket machinery crosses a
task of its own and its wrappers on both ways; for the bridge, whose round trip is a
frame each way, that was a measured share of the latency (``benchmarks/RESULTS.md``,
the bridge's round 3). Here the link reads Hypercorn's ASGI ``receive`` and writes
``send`` itself, in its own tasks.

A WebSocket is admitted or refused before its upgrade by ``gate.admit`` (the guard's
gates, with the bridge's origins and token forms); a refusal is the admin API's JSON
error with its status, sent as the handshake's HTTP response. An accepted socket
echoes the chosen subprotocol, and a link that ends without closing its socket closes
it with 1000. A client that leaves (``websocket.disconnect``) cancels the link; the
link's reader sees it on its next read, which it makes whenever it is not handling a
frame; when it stops for good (an ``auth`` refusal, a client cut off for being too
slow) the link's writer closes the socket and ends it within a bounded time.

A plain HTTP request meets the guard's gates, then 426 (``GET``) or 405.
"""

from __future__ import annotations

import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope, WebsocketScope

from actors.log_events import get_logger
from supervisor.bridge.gate import Admit, admit_scope, choose_subprotocol, client_address, role_denial
from supervisor.bridge.hub import BridgeHub
from supervisor.bridge.link import BridgeLink
from supervisor.web.auth import Denial, Presented
from supervisor.web.errors import METHOD_NOT_ALLOWED, ApiError
from supervisor.web.exchange import RESPONSE_TIMEOUT_S
from supervisor.web.guard import Guard
from supervisor.web.http import Headers, Response, json_response, send_refusal, send_response
from supervisor.web.roles import Principal

log = get_logger("supervisor.bridge")

BRIDGE_PATH = "/v1/bridge"
BRIDGE_OPERATION = "bridge"
UPGRADE_REQUIRED = ApiError(
    426, "upgrade_required", "this endpoint is a WebSocket; connect with ws://", {"Upgrade": "websocket"}
)


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


class BridgeApp:
    """The ASGI app of ``/v1/bridge`` (the mount table gives it that path alone)."""

    served = {"GET": "bridge"}
    """Method → operation of what it answers (the route table's row, checked)."""

    def __init__(self, hub: BridgeHub, guard: Guard) -> None:
        self.hub = hub
        self.guard = guard

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "websocket":
            await self._serve_socket(scope, receive, send)
        elif scope["type"] == "http":
            verdict = await self.guard.verdict(Headers(scope["headers"]), scope, None)
            if not isinstance(verdict, ApiError):
                allowed = scope["method"] in ("GET", "HEAD")
                verdict = (
                    UPGRADE_REQUIRED
                    if allowed
                    else ApiError(405, "method_not_allowed", METHOD_NOT_ALLOWED, {"Allow": "GET"})
                )
            await send_response(send, self._error(verdict), RESPONSE_TIMEOUT_S)

    async def _signed_in(self, token: str, scope: WebsocketScope) -> Admit | Denial | ApiError:
        """A presented token (no static one) through sign-in, then the role check."""
        principal = await self.guard.signed_in(token, BRIDGE_OPERATION)
        if isinstance(principal, ApiError):
            return principal
        return role_denial(principal) or Admit(
            principal, choose_subprotocol(list(scope.get("subprotocols", ())))
        )

    async def _auth_frame_signin(self, token: str) -> Principal | str:
        """An ``auth`` frame's token that is no static one: who it signs in, or why not."""
        if self.guard.signin is None:
            return "the token is not valid"
        principal = await self.guard.signed_in(token, BRIDGE_OPERATION)
        return principal.message if isinstance(principal, ApiError) else principal

    def _error(self, error: ApiError) -> Response:
        """The admin API's JSON error (its headers first, as the admin app sends them)."""
        return json_response(error.body(), error.status, error.headers, scrub=self.guard.scrubber.scrub)

    async def _serve_socket(
        self, scope: WebsocketScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if (await receive())["type"] != "websocket.connect":
            return  # gone before it was handled
        tokens = self.guard.tokens()
        admitted = admit_scope(
            scope,
            tokens=tokens,
            allowed_origins=self.guard.config.bridge.allowed_origins,
            bind_is_loopback=self.guard.bind_is_loopback,
            signin=self.guard.signin is not None,
        )
        verdict = (
            await self._signed_in(admitted.token, scope) if isinstance(admitted, Presented) else admitted
        )
        if isinstance(verdict, Denial):
            verdict = self.guard.denial(verdict, BRIDGE_OPERATION)
        if isinstance(verdict, ApiError):
            await send_refusal(send, self._error(verdict))
            return
        await send({"type": "websocket.accept", "subprotocol": verdict.subprotocol, "headers": []})
        socket = AsgiSocket(receive, send)
        try:
            with socket.gone:
                link = BridgeLink(self.hub, socket, verdict.principal, client_address(scope), tokens)
                link.signin = self._auth_frame_signin
                await link.run()
        except Exception:
            log.exception("bridge socket failed", extra={"fields": {"client": client_address(scope)}})
        if not socket.closed:
            await socket.close(1000)
