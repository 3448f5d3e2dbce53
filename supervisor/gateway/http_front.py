"""``/mcp``: the gateway over Streamable HTTP, on the admin app.

The admin app's guard has run first (Host and Origin loopback, bearer token →
principal, the route's action ``use_sessions``), so every handler here knows its
tenant. ``GatewayHandlers`` is a mixin of ``AdminApi``: the route table names these
methods as it names the others.

- ``POST /mcp``: one JSON-RPC message. ``initialize`` without ``Mcp-Session-Id``
  opens a session (``http_sessions.py``) and answers with its id; every later message
  names it (unknown or expired → 404, so the client initializes again). A
  notification or response → 202. A request → its response as ``application/json``,
  or, when the client accepts ``text/event-stream``, as an SSE stream (a priming
  event, the related messages: progress, server requests; then the response): a
  ``tools/call`` (``STREAMED_AT_ONCE``) unless its response comes first within
  ``JSON_WINDOW_S`` (a call that is done needs no id to resume from, and a JSON body
  costs both sides a fraction of a stream's), others when something related is sent
  before their response. A per-request-era message
  (``eras.is_new_era``) goes to the ``NewEraHandler``, in a task of the gateway's
  nursery; the client's hang-up (before its answer, or mid-stream) cancels that task,
  as a cancel would: the backend call is cancelled and its server told.
- ``GET /mcp``: the session's standalone SSE stream, or (``Last-Event-ID``) the rest
  of any stream of the session after that event.
- ``DELETE /mcp``: the session ends, its ``scope: session`` servers stop.
- ``GET /v1/gateway/sessions``: the open sessions (a tenant's own; an operator's, all).

The request's body bound is ``gateway.max_message_bytes``, not the admin API's
(``app.py`` lifts Quart's for ``/mcp``): a message over it gets an error of its own.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import attrs
import orjson
import trio
from quart import request
from quart_trio.wrappers import TrioResponse
from quart_trio.wrappers.response import TrioIterableBody
from werkzeug.datastructures import Headers, MIMEAccept
from werkzeug.http import parse_accept_header

from supervisor.admin.caller import scope as _scope
from supervisor.admin.caller import tenant as _tenant
from supervisor.gateway.eras import NewEraHandler, is_new_era
from supervisor.gateway.http_rules import (
    HttpRefusal,
    check_param_headers,
    check_version,
    kind_of,
    parse_message,
    require_param_headers,
    too_large,
)
from supervisor.gateway.http_sessions import (
    GatewayClosed,
    GatewaySession,
    GatewaySessions,
    TooManyGatewaySessions,
    session_item,
)
from supervisor.gateway.param_check import param_headers_of
from supervisor.gateway.sse_events import EventStream, StreamOutlet, parse_event_id
from supervisor.gateway.stateless import header_refusal, http_status
from supervisor.web.routes import JSON, SSE

if TYPE_CHECKING:
    from supervisor.service import Supervisor
    from supervisor.web.scrubber import SecretScrubber

MCP_PATH = "/mcp"
SESSION_HEADER = "Mcp-Session-Id"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
STREAMED_AT_ONCE = frozenset({"tools/call"})
"""Requests answered as SSE when the client accepts it, unless their response comes
within ``JSON_WINDOW_S`` with nothing before it: a call may run long, and the priming
event gives the client an id to resume from (SEP-1699) if its connection drops before
the response. Others are JSON unless something related comes before their response."""
JSON_WINDOW_S = 0.05
"""How long a call's POST waits for its response before streaming (priming event first)."""
NEW_ERA_UNSERVED = (
    "this gateway does not serve the 2026-07-28 protocol era yet; connect with the initialize "
    "handshake (protocol version 2025-11-25) instead"
)


async def cancel_when_closed(
    body: AsyncGenerator[bytes, None], scope: trio.CancelScope
) -> AsyncGenerator[bytes, None]:
    """``body``, and ``scope`` cancelled when it ends: a response stream that closes
    before its answer (the client hung up) cancels the work behind it."""
    try:
        async with aclosing(body):
            async for chunk in body:
                yield chunk
    finally:
        scope.cancel()


@attrs.frozen(slots=True)
class McpPost:
    """What ``POST /mcp`` reads of its request, whichever path serves it: the headers,
    the caller's tenant (the guard's principal), the declared length and the body."""

    headers: Headers
    tenant: str
    content_length: int | None
    body: AsyncIterable[bytes]


def accepts_sse(headers: Headers) -> bool:
    """Whether the client accepts ``text/event-stream`` (werkzeug's reading of
    ``Accept``, as Quart's ``request.accept_mimetypes``)."""
    accepted = parse_accept_header(headers.get("Accept"), MIMEAccept)
    return any(value.lower() == SSE and quality > 0 for value, quality in accepted)


def refusal_response(refusal: HttpRefusal, scrub: Any = None) -> TrioResponse:
    """An HTTP refusal with its JSON-RPC error body."""
    body = refusal.body() if scrub is None else scrub(refusal.body())
    return TrioResponse(orjson.dumps(body), status=refusal.status, content_type=JSON)


class GatewayHandlers:
    """The ``/mcp`` and ``/v1/gateway`` handlers (a mixin of ``AdminApi``)."""

    supervisor: Supervisor
    scrubber: SecretScrubber
    gateway: GatewaySessions
    new_era: NewEraHandler | None = None

    # ---------------------------------------------------------------- responses

    def _mcp_rpc_json(
        self, message: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> TrioResponse:
        data = orjson.dumps(self.scrubber.scrub(message))
        return TrioResponse(data, status=status, headers=dict(headers or {}), content_type=JSON)

    def _mcp_refuse(self, refusal: HttpRefusal) -> TrioResponse:
        return refusal_response(refusal, self.scrubber.scrub)

    def _mcp_sse(
        self, body: AsyncGenerator[bytes, None], headers: Mapping[str, str] | None = None
    ) -> TrioResponse:
        response = TrioResponse(
            TrioIterableBody(body), status=200, headers={**SSE_HEADERS, **(headers or {})}, content_type=SSE
        )
        response.timeout = None
        return response

    # --------------------------------------------------------------------- POST

    async def mcp_post(self) -> TrioResponse:
        return await self.mcp_post_of(
            McpPost(request.headers, _tenant(), request.content_length, request.body)
        )

    async def mcp_post_of(self, post: McpPost) -> TrioResponse:
        """The answer to one ``POST /mcp`` the guard has admitted (Quart's route, or
        the lean path of ``admin/fast_mcp.py``)."""
        try:
            return await self._mcp_post(post)
        except HttpRefusal as refusal:
            return self._mcp_refuse(refusal)

    async def _mcp_post(self, post: McpPost) -> TrioResponse:
        message = parse_message(await self._mcp_read_message(post))
        headers = post.headers
        check_param_headers(message, headers.get("Mcp-Method"), headers.get("Mcp-Name"))
        session_id = headers.get(SESSION_HEADER)
        version = headers.get("MCP-Protocol-Version")
        request_id = message.get("id")
        if is_new_era(message, version, session_id):
            return await self._mcp_new_era(message, post)
        if session_id is None:
            if message.get("method") != "initialize":
                raise HttpRefusal(
                    400,
                    f"{SESSION_HEADER} is missing: open a session with initialize first, "
                    f"then send its id in the {SESSION_HEADER} header",
                    request_id=request_id,
                )
            return await self._mcp_initialize(message, post.tenant)
        record = self._mcp_session(session_id, post.tenant, request_id)
        check_version(version, record.peer.protocol_version, request_id)
        record.touch()
        if kind_of(message) != "request":
            await record.peer.receive(message, record.outlet())
            return TrioResponse(b"", status=202)
        sse = accepts_sse(headers)
        stream = record.new_stream() if sse else EventStream("json")
        self.gateway.answer(record, message, StreamOutlet(stream) if sse else record.outlet(), stream)
        window = JSON_WINDOW_S if sse and message.get("method") in STREAMED_AT_ONCE else None
        return await self._mcp_reply(stream, window)

    async def _mcp_read_message(self, post: McpPost) -> bytes:
        """The body, refused past ``gateway.max_message_bytes`` without reading it all."""
        bound = self.supervisor.config.gateway.max_message_bytes
        length = post.content_length
        if length is not None and length > bound:
            raise too_large(length, bound)
        data = bytearray()
        async for chunk in post.body:
            data += chunk
            if len(data) > bound:
                raise too_large(None, bound)
        return bytes(data)

    def _mcp_session(self, session_id: str, tenant: str, request_id: Any = None) -> GatewaySession:
        record = self.gateway.get(session_id, tenant)
        if record is None:
            raise HttpRefusal(
                404,
                f"no MCP session {session_id!r} (unknown, ended or expired): send initialize "
                f"without {SESSION_HEADER} to open a new one",
                request_id=request_id,
            )
        return record

    async def _mcp_initialize(self, message: Mapping[str, Any], tenant: str) -> TrioResponse:
        request_id = message.get("id")
        try:
            record = await self.gateway.open(tenant)
        except TooManyGatewaySessions as exc:
            raise HttpRefusal(429, str(exc), request_id=request_id) from None
        except GatewayClosed as exc:
            raise HttpRefusal(503, str(exc), request_id=request_id) from None
        response = await record.peer.receive(message, record.outlet())
        if response is None or "error" in response:
            await self.gateway.close(record.id, None)
            return self._mcp_rpc_json(response, 400)
        self.gateway.announce(record)
        return self._mcp_rpc_json(response, headers={SESSION_HEADER: record.id})

    async def _mcp_reply(self, stream: EventStream, window_s: float | None = None) -> TrioResponse:
        """JSON when the response comes first (within ``window_s``, if given); else SSE
        from the first event."""
        with trio.move_on_after(window_s if window_s is not None else float("inf")):
            await stream.changed(0)
        if stream.finished and stream.related == 0 and stream.response is not None:
            return self._mcp_rpc_json(stream.response)
        return self._mcp_sse(stream.follow(0))

    async def _mcp_new_era(self, message: Mapping[str, Any], post: McpPost) -> TrioResponse:
        handler = self.new_era
        if handler is None:
            raise HttpRefusal(400, NEW_ERA_UNSERVED, request_id=message.get("id"))
        headers = post.headers
        refused = header_refusal(message, headers.get("MCP-Protocol-Version"))
        if refused is not None:
            return self._mcp_rpc_json(refused, http_status(refused))
        require_param_headers(message, headers.get("Mcp-Method"), headers.get("Mcp-Name"))
        tenant = post.tenant
        refused = await handler.check_headers(message, param_headers_of(headers.items()), tenant)
        if refused is not None:
            return self._mcp_rpc_json(refused, http_status(refused))
        stream = EventStream("n" if accepts_sse(headers) else "json", scrub=self.scrubber.scrub)
        hung_up = trio.CancelScope()

        async def answer() -> None:
            response: dict[str, Any] | None = None
            try:
                with hung_up:
                    response = await handler.receive(message, StreamOutlet(stream), tenant)
            finally:
                if response is not None:
                    stream.publish(response, response=True)
                else:
                    stream.finish()

        self.gateway.start_background(answer)
        try:  # Quart cancels this handler when the client hangs up before the answer
            await stream.changed(0)
        except BaseException:
            hung_up.cancel()
            raise
        if stream.finished and stream.response is None and stream.related == 0:
            return TrioResponse(b"", status=202)
        if stream.finished and stream.related == 0 and stream.response is not None:
            return self._mcp_rpc_json(stream.response, http_status(stream.response))
        return self._mcp_sse(cancel_when_closed(stream.follow(0), hung_up))

    # ---------------------------------------------------------------------- GET

    async def mcp_get(self) -> TrioResponse:
        try:
            return self._mcp_get()
        except HttpRefusal as refusal:
            return self._mcp_refuse(refusal)

    def _mcp_get(self) -> TrioResponse:
        record = self._mcp_session(self._mcp_session_header(), _tenant())
        if not accepts_sse(request.headers):
            raise HttpRefusal(406, f"GET {MCP_PATH} is an SSE stream: send Accept: text/event-stream")
        last = request.headers.get("Last-Event-ID")
        if last is None:
            stream = record.standalone
            return self._mcp_sse(stream.follow(stream.delivered, stream.take_over()))
        parsed = parse_event_id(last)
        resumed = record.stream(parsed[0]) if parsed is not None else None
        if parsed is None or resumed is None:
            raise HttpRefusal(
                400, f"Last-Event-ID {last!r} names no stream this session still keeps; GET without it"
            )
        token = resumed.take_over() if resumed is record.standalone else None
        return self._mcp_sse(resumed.follow(parsed[1], token))

    def _mcp_session_header(self) -> str:
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is None:
            raise HttpRefusal(400, f"{SESSION_HEADER} is missing: name the session this request is for")
        return session_id

    # ------------------------------------------------------------------- DELETE

    async def mcp_delete(self) -> TrioResponse:
        try:
            record = self._mcp_session(self._mcp_session_header(), _tenant())
        except HttpRefusal as refusal:
            return self._mcp_refuse(refusal)
        await self.gateway.close(record.id, None)
        return TrioResponse(b"", status=204)

    # ---------------------------------------------------------------- operators

    async def list_gateway_sessions(self) -> TrioResponse:
        items = [session_item(record) for record in self.gateway.listing(_scope())]
        return self._mcp_rpc_json({"sessions": items})
