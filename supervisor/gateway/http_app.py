"""``/mcp`` as ONE ASGI app: ``POST``, ``GET`` and ``DELETE``, with no framework.

A request meets what every app of ``serve`` does, in order: the guard
(``web/guard.py``) with the operation its method names (``HEAD`` is ``GET``'s, as
werkzeug routes it); a method ``/mcp`` does not serve is a 405 naming those it does;
then the exchange (``web/exchange.py``): the body read beside the handler, bounded by
``gateway.max_message_bytes`` and the body timeout (408, then the connection closes),
a client's hang-up cancelling the handler, the answer sent within the response
timeout. Every refusal is a JSON-RPC error object (its ``data.code`` the API's error
code), since the client speaks JSON-RPC. A WebSocket upgrade is the same 405. A
handler that fails is the last-resort 500 (``web/errors.py``): a generic message,
the traceback in the (redacted) log.
"""

from __future__ import annotations

from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, HTTPScope, Scope

from supervisor.gateway.http_front import McpFront
from supervisor.gateway.http_rules import MCP_PATH, HttpRefusal
from supervisor.web.errors import INTERNAL_ERROR, METHOD_NOT_ALLOWED, ApiError, log_internal_error
from supervisor.web.exchange import BODY_TIMEOUT_S, RESPONSE_TIMEOUT_S, Request, exchange
from supervisor.web.guard import Guard
from supervisor.web.http import Headers, Response, json_response, send_refusal, send_response

OPERATIONS = {"POST": "mcp_post", "GET": "mcp_get", "HEAD": "mcp_get", "DELETE": "mcp_delete"}
"""Method → the route table's operation (its role check's action comes from it)."""
NOT_ALLOWED = ApiError(405, "method_not_allowed", METHOD_NOT_ALLOWED, {"Allow": "DELETE, GET, POST"})
MCP_REFUSAL = -32600
"""The JSON-RPC error code of an HTTP refusal on ``/mcp`` (its ``data.code`` is the
admin API's error code: ``unauthorized``, ``forbidden``…)."""


class McpApp:
    """The ASGI app of ``/mcp`` (the mount table gives it that path alone)."""

    served = {method: operation for method, operation in OPERATIONS.items() if method != "HEAD"}
    """Method → operation of what it answers (the route table's rows, checked)."""

    def __init__(
        self,
        front: McpFront,
        guard: Guard,
        *,
        body_timeout_s: float = BODY_TIMEOUT_S,
        response_timeout_s: float = RESPONSE_TIMEOUT_S,
    ) -> None:
        self.front = front
        self.guard = guard
        self.body_timeout_s = body_timeout_s
        self.response_timeout_s = response_timeout_s
        self._handlers = {"mcp_post": front.post, "mcp_get": front.get, "mcp_delete": front.delete}
        """Each takes the request, the tenant and the person (``get`` and ``delete``
        find a session by its id, among the tenant's)."""

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket" and (await receive())["type"] == "websocket.connect":
            verdict = await self.guard.verdict(Headers(scope["headers"]), scope, None)
            await send_refusal(send, self.refusal(verdict if isinstance(verdict, ApiError) else NOT_ALLOWED))

    async def _http(self, scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        headers = Headers(scope["headers"])
        operation = OPERATIONS.get(scope["method"])
        verdict = await self.guard.verdict(headers, scope, operation)
        if operation is None and not isinstance(verdict, ApiError):
            verdict = NOT_ALLOWED
        if isinstance(verdict, ApiError):
            await send_response(send, self.refusal(verdict), self.response_timeout_s)
            return
        assert verdict is not None and operation is not None  # no /mcp operation is public
        handler, tenant, person = self._handlers[operation], verdict.tenant, verdict.person

        async def answer(request: Request) -> Response:
            return await handler(request, tenant, person)

        await exchange(
            scope,
            receive,
            send,
            answer,
            headers=headers,
            body_timeout_s=self.body_timeout_s,
            response_timeout_s=self.response_timeout_s,
            on_error=self._internal_error,
        )

    def refusal(self, error: ApiError) -> Response:
        """A refusal on ``/mcp``: a JSON-RPC error object (its ``data.code`` the admin
        API's error code), with the error's headers (``WWW-Authenticate``, ``Allow``)."""
        data = {"code": error.code, **error.extra}
        return self.front.refuse(
            HttpRefusal(error.status, error.message, code=MCP_REFUSAL, data=data, headers=error.headers)
        )

    def _internal_error(self) -> Response:
        log_internal_error(MCP_PATH)
        return json_response(INTERNAL_ERROR, 500, scrub=self.front.scrub)
