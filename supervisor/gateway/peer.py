"""One handshake-era gateway client: its MCP session over a ``GatewayCore``.

Both fronts feed it the client's messages (``receive``), each with the outlet its
answer and related messages go to, and send what it returns:

- a request → its response (``initialize`` included; requests before it are refused,
  ``ping`` aside);
- ``notifications/cancelled`` naming a request in flight → the call is cancelled
  (``Supervisor.requests``), so the backend is told, or, for a request with no call
  behind it (a listing waiting for a server), its work is stopped; either way that
  request gets no response (the spec: a receiver should not answer a cancelled
  request), and ``receive`` returns None for it. A cancel of anything else (answered
  already, unknown, ``initialize``) is ignored. Other notifications are dropped;
- a response → handed to the request of ours it answers (``ClientRequests``).

The server requests a call causes (sampling, elicitation, roots) go to the outlet of
the client request that caused it, and only when the client declared that capability
at ``initialize``; otherwise the supervisor-level handler, if any, answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio

from actors.connection.client_side import ClientSide, RequestRefused, ServerRequestHandler
from supervisor.gateway.core import GatewayCore, RequestContext
from supervisor.gateway.outlet import ClientRefused, ClientRequests, Outlet
from supervisor.gateway.results import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    JsonRpcError,
    error_response,
    result_response,
)
from supervisor.sessions.session import Session

SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
"""Handshake-era protocol versions we speak, newest first."""
LATEST_VERSION = SUPPORTED_VERSIONS[0]
PASSED_ON: dict[str, Any] = {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}}
"""What a gateway's fronts (``serve``'s ``/mcp``, ``mcp-supervisor stdio``) tell the
handshake-era servers their client can do: the servers start before any client says
what it can, so they are told everything a client may pass on; each request is then
passed on to the client whose call caused it when that client declared the
capability, and refused when it did not (``GatewayPeer.client_side``)."""

# A server request's method → the client capability it needs.
_CAPABILITY_OF = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}


@attrs.define(eq=False)
class _InFlight:
    """One client request being answered: how to stop it, and whether the client did."""

    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    cancelled: bool = False


class GatewayPeer:
    """One handshake-era client (see the module docstring).

    ``cancel(key)`` cancels a call in flight by its request key (the front passes
    ``Supervisor.requests.cancel`` bound to the session's tenant)."""

    def __init__(
        self,
        session: Session,
        cancel: Callable[[str], bool],
        *,
        prefix: bool = True,
        version: str = "0",
        instructions: str | None = None,
    ) -> None:
        self.core = GatewayCore(session, prefix=prefix, version=version)
        self.session = session
        self.client_requests = ClientRequests()
        self._cancel = cancel
        self._instructions = instructions
        self.protocol_version: str | None = None
        self.client_info: Mapping[str, Any] | None = None
        self.client_capabilities: Mapping[str, Any] = {}
        self.closed = False
        """The client is gone (``close``): it can answer nothing more."""
        self._in_flight: dict[str, _InFlight] = {}
        """Request key → the request being answered (``initialize`` is never cancelled)."""

    @property
    def initialized(self) -> bool:
        return self.protocol_version is not None

    def request_key(self, request_id: Any) -> str:
        """The key a client request is cancellable by (unique per tenant)."""
        return f"gateway:{self.session.id}:{request_id!r}"

    async def receive(self, message: Mapping[str, Any], outlet: Outlet) -> dict[str, Any] | None:
        """Take one message from the client; the response to send, if any (None for a
        notification, a response, and a request the client cancelled meanwhile)."""
        method = message.get("method")
        if not isinstance(method, str):
            if "id" in message and ("result" in message or "error" in message):
                self.client_requests.deliver(message)
            return None
        if "id" not in message:
            self._notified(method, message.get("params"))
            return None
        request_id = message["id"]
        key = self.request_key(request_id)
        running = _InFlight()
        if method != "initialize":  # the spec: a client never cancels initialize
            self._in_flight[key] = running
        response: dict[str, Any] | None = None
        try:
            with running.scope:
                try:
                    result = await self._answer(method, message.get("params"), request_id, outlet)
                    response = result_response(request_id, result)
                except JsonRpcError as error:
                    response = error_response(request_id, error)
        finally:
            if self._in_flight.get(key) is running:
                del self._in_flight[key]
        return None if running.cancelled else response

    async def _answer(self, method: str, params: Any, request_id: Any, outlet: Outlet) -> dict[str, Any]:
        if method == "initialize":
            return await self._initialize(params)
        if not self.initialized and method != "ping":
            raise JsonRpcError(INVALID_REQUEST, f"{method} before initialize: send initialize first")
        meta = params.get("_meta") if isinstance(params, Mapping) else None
        ctx = RequestContext(
            outlet=outlet,
            progress_token=meta.get("progressToken") if isinstance(meta, Mapping) else None,
            cancel_key=self.request_key(request_id),
            client=self.client_side(outlet),
        )
        return await self.core.handle(method, params, ctx)

    async def _initialize(self, params: Any) -> dict[str, Any]:
        if not isinstance(params, Mapping) or not isinstance(params.get("protocolVersion"), str):
            raise JsonRpcError(INVALID_PARAMS, "initialize: params.protocolVersion must be a string")
        if self.initialized:
            raise JsonRpcError(INVALID_REQUEST, "initialize: this session is initialized already")
        asked = params["protocolVersion"]
        capabilities = params.get("capabilities")
        info = params.get("clientInfo")
        self.client_capabilities = capabilities if isinstance(capabilities, Mapping) else {}
        self.client_info = info if isinstance(info, Mapping) else None
        await self.core.new_turn()  # the servers it needs are up: capabilities say what is there
        await self.session.want_logs(self.core.log_level)  # warning and above, until it says
        self.protocol_version = asked if asked in SUPPORTED_VERSIONS else LATEST_VERSION
        result: dict[str, Any] = {
            "protocolVersion": self.protocol_version,
            "capabilities": self.core.capabilities(),
            "serverInfo": self.core.server_info,
        }
        if self._instructions:
            result["instructions"] = self._instructions
        return result

    def _notified(self, method: str, params: Any) -> None:
        if method != "notifications/cancelled" or not isinstance(params, Mapping):
            return
        if "requestId" not in params:
            return
        key = self.request_key(params["requestId"])
        running = self._in_flight.get(key)
        if running is None:
            return  # answered already, never sent, or initialize: nothing to cancel
        running.cancelled = True
        if not self._cancel(key):  # no call behind it: stop the work here
            running.scope.cancel()

    def client_side(self, outlet: Outlet) -> ClientSide:
        """The side of one client request's calls: its server requests go to ``outlet``
        when this client declared the capability they need."""
        declared = self.client_capabilities
        requests = self.client_requests

        async def ask(server: str, method: str, params: Any) -> Mapping[str, Any] | None:
            capability = _CAPABILITY_OF.get(method)
            if capability is None or not isinstance(declared.get(capability), Mapping):
                return None  # not ours to answer: the supervisor-level handler may
            try:
                return await requests.ask(outlet, method, params)
            except ClientRefused as refused:
                raise RequestRefused(refused.code, refused.message) from None

        handler: ServerRequestHandler = ask
        return ClientSide(self.session.id, handler, dict(declared), log_level=self.core.log_level)

    def close(self, reason: str) -> None:
        """The client is gone: requests waiting on it fail."""
        self.closed = True
        self.client_requests.close(reason)
