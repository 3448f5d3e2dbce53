"""What ``POST``, ``GET`` and ``DELETE /mcp`` answer: the gateway over Streamable HTTP.

The app (``http_app.py``) has run the guard first (Host and Origin loopback, bearer
token → tenant, the operation's role), so every handler here knows its tenant. No
framework: a handler reads a ``Request`` and returns a ``Response`` (``web/http.py``).

- ``POST /mcp``: one JSON-RPC message. ``initialize`` without ``Mcp-Session-Id``
  opens a session (``http_sessions.py``) and answers with its id; every later message
  names it (unknown or expired → 404, so the client initializes again). A
  notification or response → 202. A request → its response as ``application/json``,
  or, when the client accepts ``text/event-stream``, as an SSE stream (a priming
  event, the related messages: progress, server requests; then the response): a
  ``tools/call`` (``STREAMED_AT_ONCE``) unless its response comes first within
  ``JSON_WINDOW_S`` (a call that is done needs no id to resume from, and a JSON body
  costs both sides a fraction of a stream's), others when something related is sent
  before their response. A request the client cancels (``notifications/cancelled``)
  gets no response: its stream ends without one, and resuming it is refused (410);
  one that had sent nothing yet is an SSE stream with no event, or 202 for a client
  that takes JSON only. A per-request-era message (``eras.is_new_era``) goes to the
  ``NewEraHandler``, in a task of the gateway's nursery; the client's hang-up (before
  its answer, or mid-stream) cancels that task, as a cancel would: the backend call is
  cancelled and its server told.
- ``GET /mcp``: the session's standalone SSE stream, or (``Last-Event-ID``) the rest
  of any stream of the session after that event.
- ``DELETE /mcp``: the session ends, its ``scope: session`` servers stop.

The body's bound is ``gateway.max_message_bytes``: a message over it gets an error of
its own, and the session lives on.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import trio

from supervisor.gateway.eras import NewEraHandler, is_new_era
from supervisor.gateway.http_rules import (
    MCP_PATH,
    SESSION_HEADER,
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
)
from supervisor.gateway.param_check import param_headers_of
from supervisor.gateway.passing_on import PassingOn
from supervisor.gateway.roaming import Elsewhere
from supervisor.gateway.sse_events import EventStream, StreamOutlet, parse_event_id
from supervisor.gateway.stateless import header_refusal, http_status
from supervisor.gateway.traced import Arrival, http_arrival
from supervisor.web.exchange import BodyTimeout, Request
from supervisor.web.http import (
    Headers,
    Response,
    Scrub,
    accepts,
    content_length,
    empty_response,
    json_response,
    stream_response,
)

if TYPE_CHECKING:
    from supervisor.service import Supervisor

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


async def _no_events() -> AsyncGenerator[bytes, None]:
    """An SSE body that ends at once (a cancelled request's: no response, no id)."""
    return
    yield  # pragma: no cover


class McpFront:
    """The answers of ``/mcp``, for one server's gateway sessions and new-era handler."""

    def __init__(
        self,
        supervisor: Supervisor,
        sessions: GatewaySessions,
        new_era: NewEraHandler | None,
        scrub: Scrub,
    ) -> None:
        self.supervisor = supervisor
        self.sessions = sessions
        self.new_era = new_era
        self.scrub = scrub
        self.passing = PassingOn(sessions, new_era, self.refuse)
        """Sessions held elsewhere, and retries of calls held elsewhere (``passing_on.py``)."""

    # ---------------------------------------------------------------- responses

    def _json(self, message: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
        return json_response(message, status, headers, scrub=self.scrub)

    def refuse(self, refusal: HttpRefusal) -> Response:
        """An HTTP refusal with its JSON-RPC error body."""
        return self._json(refusal.body(), refusal.status).with_headers(refusal.headers)

    def _sse(self, body: AsyncGenerator[bytes, None]) -> Response:
        return stream_response(body, SSE_HEADERS)

    # --------------------------------------------------------------------- POST

    async def post(self, request: Request, tenant: str, person: str | None = None) -> Response:
        """The answer to one ``POST /mcp`` the guard has admitted (``person``: who signed
        in; None, the tenant's name)."""
        try:
            return await self._post(request, tenant, person)
        except HttpRefusal as refusal:
            return self.refuse(refusal)

    async def _post(self, request: Request, tenant: str, person: str | None) -> Response:
        headers = request.headers
        raw = await self._read_message(headers, request.body)
        message = parse_message(raw)
        arrival = http_arrival(headers, request.scope.get("client"))  # None: traces are off
        check_param_headers(message, headers.get("Mcp-Method"), headers.get("Mcp-Name"))
        session_id = headers.get(SESSION_HEADER)
        version = headers.get("MCP-Protocol-Version")
        request_id = message.get("id")
        if is_new_era(message, version, session_id):
            holder = self.passing.holder_of_state(message, tenant)
            if holder is not None:  # a retry of a call another replica run holds
                return await self.passing.to_run(request, raw, holder, request_id)
            return await self._new_era(message, headers, (tenant, person), arrival)
        if session_id is None:
            if message.get("method") != "initialize":
                raise HttpRefusal(
                    400,
                    f"{SESSION_HEADER} is missing: open a session with initialize first, "
                    f"then send its id in the {SESSION_HEADER} header",
                    request_id=request_id,
                )
            return await self._initialize(message, tenant, arrival, person)
        found = await self.passing.held(session_id, tenant, headers, request_id)
        if isinstance(found, Elsewhere):
            answered = await self.passing.pass_on(request, raw, session_id, tenant, found, request_id)
            if isinstance(answered, Response):
                return answered
            found = answered  # its holder was gone: taken over here
        return await self._in_session(found, message, headers, arrival)

    async def _in_session(
        self, record: GatewaySession, message: Mapping[str, Any], headers: Headers, arrival: Arrival | None
    ) -> Response:
        request_id = message.get("id")
        check_version(headers.get("MCP-Protocol-Version"), record.peer.protocol_version, request_id)
        record.touch()
        if kind_of(message) != "request":
            await record.peer.receive(message, record.outlet(), arrival)
            return empty_response(202)
        sse = accepts(headers)
        stream = record.new_stream() if sse else EventStream("json")
        outlet = StreamOutlet(stream) if sse else record.outlet()
        self.sessions.answer(record, message, outlet, stream, arrival)
        window = JSON_WINDOW_S if sse and message.get("method") in STREAMED_AT_ONCE else None
        return await self._reply(stream, window, sse=sse)

    async def _read_message(self, headers: Headers, body: AsyncIterable[bytes]) -> bytes:
        """The body, refused past ``gateway.max_message_bytes`` without reading it all,
        and past the body timeout."""
        bound = self.supervisor.config.gateway.max_message_bytes
        length = content_length(headers)
        if length is not None and length > bound:
            raise too_large(length, bound)
        data = bytearray()
        try:
            async for chunk in body:
                data += chunk
                if len(data) > bound:
                    raise too_large(None, bound)
        except BodyTimeout as exc:
            raise HttpRefusal(
                408,
                f"{exc} (the server's body timeout); send the whole message at once",
                data={"code": "request_timeout"},
                headers={"Connection": "close"},  # what is left of the body is not read
            ) from None
        return bytes(data)

    async def _session(self, request: Request, tenant: str) -> GatewaySession | Response:
        """The session a GET or DELETE names, held here (taken over if need be), or the
        answer of the replica run holding it."""
        session_id = self._session_header(request.headers)
        found = await self.passing.held(session_id, tenant, request.headers)
        if isinstance(found, Elsewhere):
            return await self.passing.pass_on(request, b"", session_id, tenant, found)
        return found

    async def _initialize(
        self, message: Mapping[str, Any], tenant: str, arrival: Arrival | None, person: str | None
    ) -> Response:
        request_id = message.get("id")
        try:
            record = await self.sessions.open(tenant, person)
        except TooManyGatewaySessions as exc:
            raise HttpRefusal(429, str(exc), request_id=request_id) from None
        except GatewayClosed as exc:
            raise HttpRefusal(503, str(exc), request_id=request_id) from None
        response = await record.peer.receive(message, record.outlet(), arrival)
        if response is None or "error" in response:
            await self.sessions.close(record.id, None)
            return self._json(response, 400)
        if self.sessions.roaming is not None:  # kept in the store before its id goes out
            await self.sessions.roaming.opened(record)
        self.sessions.announce(record)
        return self._json(response, headers={SESSION_HEADER: record.id})

    async def _reply(self, stream: EventStream, window_s: float | None = None, *, sse: bool) -> Response:
        """JSON when the response comes first (within ``window_s``, if given); else SSE
        from the first event. A request the client cancelled before anything was sent
        gets no response: an SSE stream with no event (no id: nothing to resume), or 202
        for a client that takes JSON only."""
        with trio.move_on_after(window_s if window_s is not None else float("inf")):
            await stream.changed(0)
        if stream.finished and stream.related == 0 and stream.response is not None:
            return self._json(stream.response)
        if stream.cancelled and stream.last == 0:
            return self._sse(_no_events()) if sse else empty_response(202)
        return self._sse(stream.follow(0))

    async def _new_era(
        self,
        message: Mapping[str, Any],
        headers: Headers,
        who: tuple[str, str | None],
        arrival: Arrival | None,
    ) -> Response:
        handler, (tenant, person) = self.new_era, who
        if handler is None:
            raise HttpRefusal(400, NEW_ERA_UNSERVED, request_id=message.get("id"))
        refused = header_refusal(message, headers.get("MCP-Protocol-Version"))
        if refused is not None:
            return self._json(refused, http_status(refused))
        require_param_headers(message, headers.get("Mcp-Method"), headers.get("Mcp-Name"))
        refused = await handler.check_headers(message, param_headers_of(headers.items()), tenant, person)
        if refused is not None:
            return self._json(refused, http_status(refused))
        stream = EventStream("n" if accepts(headers) else "json", scrub=self.scrub)
        hung_up = trio.CancelScope()

        async def answer() -> None:
            response: dict[str, Any] | None = None
            try:
                with hung_up:
                    response = await handler.receive(message, StreamOutlet(stream), tenant, arrival, person)
            finally:
                if response is not None:
                    stream.publish(response, response=True)
                else:
                    stream.finish()

        self.sessions.start_background(answer)
        try:  # the exchange cancels this handler when the client hangs up before the answer
            await stream.changed(0)
        except BaseException:
            hung_up.cancel()
            raise
        if stream.finished and stream.response is None and stream.related == 0:
            return empty_response(202)
        if stream.finished and stream.related == 0 and stream.response is not None:
            return self._json(stream.response, http_status(stream.response))
        return self._sse(cancel_when_closed(stream.follow(0), hung_up))

    # ---------------------------------------------------------------------- GET

    async def get(self, request: Request, tenant: str, person: str | None = None) -> Response:
        """The standalone stream, or the rest of a stream after ``Last-Event-ID``."""
        try:
            found = await self._session(request, tenant)
            return found if isinstance(found, Response) else self._get(request.headers, found)
        except HttpRefusal as refusal:
            return self.refuse(refusal)

    def _get(self, headers: Headers, record: GatewaySession) -> Response:
        if not accepts(headers):
            raise HttpRefusal(406, f"GET {MCP_PATH} is an SSE stream: send Accept: text/event-stream")
        last = headers.get("Last-Event-ID")
        if last is None:
            stream = record.standalone
            return self._sse(stream.follow(stream.delivered, stream.take_over()))
        parsed = parse_event_id(last)
        resumed = record.stream(parsed[0]) if parsed is not None else None
        if parsed is None or resumed is None:
            raise HttpRefusal(
                400, f"Last-Event-ID {last!r} names no stream this session still keeps; GET without it"
            )
        if resumed.cancelled:
            raise HttpRefusal(
                410,
                f"Last-Event-ID {last!r} names the stream of a request you cancelled: it ended "
                "without a response, and nothing more comes on it",
            )
        token = resumed.take_over() if resumed is record.standalone else None
        return self._sse(resumed.follow(parsed[1], token))

    def _session_header(self, headers: Headers) -> str:
        session_id = headers.get(SESSION_HEADER)
        if session_id is None:
            raise HttpRefusal(400, f"{SESSION_HEADER} is missing: name the session this request is for")
        return session_id

    # ------------------------------------------------------------------- DELETE

    async def delete(self, request: Request, tenant: str, person: str | None = None) -> Response:
        """The session ends (204), or the refusal."""
        try:
            found = await self._session(request, tenant)
        except HttpRefusal as refusal:
            return self.refuse(refusal)
        if isinstance(found, Response):
            return found
        await self.sessions.close(found.id, None)
        return empty_response(204)
