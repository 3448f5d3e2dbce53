"""``POST /mcp`` served in front of Quart, the same way, for less.

Every MCP message of a gateway session is a ``POST /mcp``, so its cost per request
bounds the gateway's calls per second. Through Quart it pays for a request object, the
app and request contexts, routing, ``before_request`` dispatch and response
finalization: a profile of ``serve`` under 16 sessions put Quart's and Hypercorn's
request handling at 38% of the samples, against 11% for the gateway itself.
``LeanMcp`` is an ASGI app around the Quart app that serves ``POST /mcp`` itself and
passes every other request (and the lifespan, and WebSockets) to Quart unchanged.

Nothing is decided twice. The guard is the app's (``web/guard.py``: Host and
request target, Origin, token, the role of ``mcp_post``), its refusals are the app's
(``app.mcp_refusal``), the handler is the gateway's (``GatewayHandlers.mcp_post_of``,
which reads the body against ``gateway.max_message_bytes``), and the response is the
same ``TrioResponse``, sent as Quart sends it. What Quart's connection does around the
handler is kept: the body is read in a task beside it, a client that hangs up cancels
the handler, and a response that is not a stream is sent within Quart's
``RESPONSE_TIMEOUT``. A request of a shape this path does not expect (HTTP/1.0, an
absolute-form target such as ``http://host/mcp``, a ``root_path``) goes to Quart,
which has the general rules for it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, HTTPScope, Scope
from quart.utils import encode_headers
from quart_trio import QuartTrio
from quart_trio.wrappers.request import TrioBody
from werkzeug.datastructures import Headers
from werkzeug.sansio.utils import get_content_length

from supervisor.admin.app import admin_api, internal_error, mcp_refusal
from supervisor.gateway.http_front import MCP_PATH, McpPost
from supervisor.web.errors import ApiError

if TYPE_CHECKING:
    from quart_trio.wrappers import TrioResponse

POST_ENDPOINT = "mcp_post"
"""The route table's operation for ``POST /mcp``: the role check's action comes from it."""


def lean_mcp(app: QuartTrio) -> LeanMcp:
    """``app`` with ``POST /mcp`` served on the lean path."""
    return LeanMcp(app)


class LeanMcp:
    """An ASGI app: ``POST /mcp`` here, everything else to the Quart app."""

    def __init__(self, app: QuartTrio) -> None:
        self.app = app
        self.api = admin_api(app)
        self.response_timeout: float | None = app.config["RESPONSE_TIMEOUT"]

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == MCP_PATH
            and not scope.get("root_path")
            and scope["http_version"] >= "1.1"
        ):
            await self._post(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _post(self, scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        api = self.api
        headers = Headers(
            [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]]
        )
        verdict = api.guard.verdict(headers, scope, POST_ENDPOINT)
        if isinstance(verdict, ApiError):
            await self._send(send, mcp_refusal(verdict, api.scrubber))
            return
        assert verdict is not None, "a non-public route without a principal"  # the guard ensures it
        length = get_content_length(headers.get("Content-Length"), headers.get("Transfer-Encoding"))
        body = TrioBody(length, None)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_body, receive, body, nursery.cancel_scope)
            try:
                response = await api.mcp_post_of(McpPost(headers, verdict.tenant, length, body))
            except Exception:
                response = internal_error(MCP_PATH, api.scrubber)
            await self._send(send, response)
            nursery.cancel_scope.cancel()

    async def _send(self, send: ASGISendCallable, response: TrioResponse) -> None:
        """``response`` as Quart-Trio sends it (its own timeout, or ``RESPONSE_TIMEOUT``)."""
        timeout = response.timeout if response.timeout is not Ellipsis else self.response_timeout
        with trio.move_on_after(math.inf if timeout is None else timeout):
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": encode_headers(response.headers),
                }
            )
            async with response.response as chunks:
                async for data in chunks:
                    chunk = data.encode() if isinstance(data, str) else data
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _read_body(receive: ASGIReceiveCallable, body: TrioBody, hung_up: trio.CancelScope) -> None:
    """The request body into ``body``; the client's hang-up cancels ``hung_up``."""
    while True:
        message = await receive()
        if message["type"] == "http.request":
            body.append(message.get("body", b""))
            if not message.get("more_body", False):
                body.set_complete()
        elif message["type"] == "http.disconnect":
            hung_up.cancel()
            return
