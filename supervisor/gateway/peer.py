"""One handshake-era gateway client: its MCP session over a ``GatewayCore``.

Both fronts feed it the client's messages (``receive``), each with the outlet its
answer and related messages go to, and send what it returns. What each message is,
and every request id on either side, is the protocol core's server session's
(``actors/protocol/server_session.py``, ``mcp``); this class carries out its events:

- a request → its response (``initialize`` included; requests before it are refused,
  ``ping`` aside: the session answers those itself);
- ``notifications/cancelled`` naming a request in flight → the call is cancelled
  (``Supervisor.requests``), so the backend is told, or, for a request with no call
  behind it (a listing waiting for a server), its work is stopped (the cancel scope
  the request was received with); either way that request gets no response (the
  spec: a receiver should not answer a cancelled request), and ``receive`` returns
  None for it. A cancel of anything else (answered already, unknown, ``initialize``)
  is ignored. Other notifications are dropped;
- a response → handed to the request of ours it answers (the session matched it to
  the channel its asker waits on).

The server requests a call causes (sampling, elicitation, roots) go to the outlet of
the client request that caused it, and only when the client declared that capability
at ``initialize``; otherwise the supervisor-level handler, if any, answers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import trio

from actors.connection.client_side import ClientSide, RequestRefused, ServerRequestHandler
from actors.protocol.jsonrpc import to_wire
from actors.protocol.messages import ErrorResponse, Response
from actors.protocol.server_session import (
    CancelRequested,
    ClientAnswered,
    InitializeReceived,
    Replied,
    RequestReceived,
    ServerSession,
)
from supervisor.gateway.core import GatewayCore, RequestContext
from supervisor.gateway.outlet import Outlet
from supervisor.gateway.results import JsonRpcError
from supervisor.gateway.traced import PIPE, Arrival, traced
from supervisor.runtime.tracing import TRACING
from supervisor.sessions.session import Session

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
        arrival: Arrival = PIPE,
    ) -> None:
        self.core = GatewayCore(session, prefix=prefix, version=version)
        self.arrival = arrival
        """How its messages come (the SERVER spans' way in), unless ``receive`` is told."""
        self.session = session
        self.mcp = ServerSession()
        """The protocol's side of the session: handshake, requests in flight, ours."""
        self._cancel = cancel
        self._instructions = instructions

    @property
    def initialized(self) -> bool:
        return self.mcp.version is not None

    @property
    def protocol_version(self) -> str | None:
        return self.mcp.version

    @property
    def client_info(self) -> Mapping[str, Any] | None:
        return self.mcp.client_info

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        return self.mcp.client_capabilities

    @property
    def closed(self) -> bool:
        """The client is gone (``close``): it can answer nothing more."""
        return self.mcp.closed is not None

    def request_key(self, request_id: Any) -> str:
        """The key a client request is cancellable by (unique per tenant)."""
        return f"gateway:{self.session.id}:{request_id!r}"

    async def receive(
        self, message: Mapping[str, Any], outlet: Outlet, arrival: Arrival | None = None
    ) -> dict[str, Any] | None:
        """Take one message from the client; the response to send, if any (None for a
        notification, a response, and a request the client cancelled meanwhile). A
        request is traced (``traced.py``) when traces are on."""
        if TRACING.active is None:
            return await self._receive(message, outlet)
        arrival = arrival or self.arrival
        return await traced(
            message,
            arrival,
            lambda: self._receive(message, outlet),
            session_id=self.session.id if arrival.transport == "tcp" else None,  # stdio has none
            protocol_version=self.mcp.version,
        )

    async def _receive(self, message: Mapping[str, Any], outlet: Outlet) -> dict[str, Any] | None:
        event = self.mcp.receive(message, trio.CancelScope())
        if isinstance(event, RequestReceived):
            return await self._answer(event, outlet)
        if isinstance(event, InitializeReceived):
            return await self._initialize(event)
        if isinstance(event, Replied):
            return to_wire(event.message)
        if isinstance(event, CancelRequested):
            request = event.request
            if not self._cancel(self.request_key(request.id)):  # no call behind it: stop the work here
                request.tag.cancel()
        elif isinstance(event, ClientAnswered):
            _hand_over(event)
        return None

    async def _answer(self, request: RequestReceived, outlet: Outlet) -> dict[str, Any] | None:
        ctx = RequestContext(
            outlet=outlet,
            progress_token=request.progress_token,
            cancel_key=self.request_key(request.id),
            client=self.client_side(outlet),
        )
        scope: trio.CancelScope = request.tag
        response: Response | ErrorResponse | None = None
        try:
            with scope:
                try:
                    result = await self.core.handle(request.method, request.params, ctx)
                except JsonRpcError as error:
                    response = self.mcp.fail(request, error)
                else:
                    response = self.mcp.respond(request, result)
        finally:
            self.mcp.end(request)  # stopped by its cancel, or failed: no longer in flight
        return None if response is None else to_wire(response)

    async def _initialize(self, event: InitializeReceived) -> dict[str, Any]:
        try:
            await self.core.new_turn()  # the servers it needs are up: capabilities say what is there
            await self.session.want_logs(self.core.log_level)  # warning and above, until it says
        except BaseException as exc:
            self.mcp.fail(event, exc)  # the client may initialize again
            raise
        answer = self.mcp.accept_initialize(
            event,
            capabilities=self.core.capabilities(),
            server_info=self.core.server_info,
            instructions=self._instructions,
        )
        return to_wire(answer)

    def client_side(self, outlet: Outlet) -> ClientSide:
        """The side of one client request's calls: its server requests go to ``outlet``
        when this client declared the capability they need."""
        declared = self.client_capabilities
        mcp = self.mcp

        async def ask(server: str, method: str, params: Any) -> Mapping[str, Any] | None:
            capability = _CAPABILITY_OF.get(method)
            if capability is None or not isinstance(declared.get(capability), Mapping):
                return None  # not ours to answer: the supervisor-level handler may
            send, receive = trio.open_memory_channel[ClientAnswered](1)
            try:
                request = mcp.send_request(method, params, tag=send)
            except JsonRpcError as gone:
                raise RequestRefused(gone.code, gone.message) from None
            try:
                await outlet.send(to_wire(request))
                answer = await receive.receive()
            finally:
                mcp.forget(request.id)  # cancelled meanwhile: a late answer is dropped
            if answer.error is not None:
                raise RequestRefused(answer.error.code, answer.error.message)
            assert answer.result is not None
            return answer.result

        handler: ServerRequestHandler = ask
        return ClientSide(self.session.id, handler, dict(declared), log_level=self.core.log_level)

    def close(self, reason: str) -> None:
        """The client is gone: requests waiting on it fail."""
        for answered in self.mcp.close(reason):
            _hand_over(answered)


def _hand_over(answered: ClientAnswered) -> None:
    """Give the client's answer to the task waiting for it (one answer each)."""
    send: trio.MemorySendChannel[ClientAnswered] = answered.tag
    with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
        send.send_nowait(answered)
