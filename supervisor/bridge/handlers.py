"""The bridge's admin routes: the ``/v1/bridge`` WebSocket and the two listings.

A mixin of ``AdminApi`` (as the gateway's handlers are). The WebSocket does not pass
the app's ``before_request`` guard (Quart runs it for HTTP only): ``gate.admit``
makes the same checks, with the bridge's origins and token forms, before the upgrade,
and a refusal is the admin API's JSON error with its status, not a socket.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from quart import websocket
from quart_trio.wrappers import TrioResponse

from supervisor.admin.caller import scope as _scope
from supervisor.bridge.gate import Admit, admit_scope, client_address
from supervisor.bridge.hub import BridgeHub
from supervisor.bridge.link import BridgeLink
from supervisor.web.auth import Denial, TokenBook
from supervisor.web.errors import ApiError
from supervisor.web.guard import Guard

if TYPE_CHECKING:
    from collections.abc import Mapping

    from supervisor.service import Supervisor


class BridgeHandlers:
    """``bridge``, ``list_bridge_sessions``, ``list_bridge_peers``."""

    supervisor: Supervisor
    bridge_hub: BridgeHub
    guard: Guard

    def tokens(self) -> TokenBook:
        raise NotImplementedError  # AdminApi's

    def _json(self, data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> TrioResponse:
        raise NotImplementedError  # AdminApi's

    def bridge_verdict(self, scope: Mapping[str, Any], tokens: TokenBook) -> Admit | Denial:
        """``gate.admit`` on a socket's ASGI scope: the one place both ways of serving
        ``/v1/bridge`` (this route, and ``asgi_socket.py`` in front of the app) decide."""
        return admit_scope(
            scope,
            tokens=tokens,
            allowed_origins=self.supervisor.config.bridge.allowed_origins,
            bind_is_loopback=self.guard.bind_is_loopback,
        )

    def bridge_refusal(self, denial: Denial) -> TrioResponse:
        """The admin API's JSON error for a socket refused before its upgrade."""
        error = ApiError(denial.status, denial.code, denial.message, denial.headers)
        return self._json(error.body(), error.status, error.headers)

    async def bridge(self) -> TrioResponse | None:
        socket: Any = websocket._get_current_object()  # type: ignore[attr-defined]
        tokens = self.tokens()
        verdict = self.bridge_verdict(socket.scope, tokens)
        if isinstance(verdict, Denial):
            return self.bridge_refusal(verdict)
        await socket.accept(subprotocol=verdict.subprotocol)
        await BridgeLink(
            self.bridge_hub, socket, verdict.principal, client_address(socket.scope), tokens
        ).run()
        return None

    async def list_bridge_sessions(self) -> TrioResponse:
        return self._json({"sessions": self.bridge_hub.listing(_scope())})

    async def list_bridge_peers(self) -> TrioResponse:
        return self._json({"peers": self.bridge_hub.peers.listing()})
