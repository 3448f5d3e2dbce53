"""The Streamable HTTP transport (MCP 2025-03-26 and later).

The connection actor sends and receives JSON-RPC messages over a :class:`Transport`;
it must not care whether a server is a process or a URL. So this module adapts HTTP
to that shape instead of teaching the actor HTTP:

- ``send(messages)`` POSTs each message as a JSON body (``http_framing.py``).
  Notifications and responses are POSTed at once and awaited (the server answers
  202), which keeps their order: the ``notifications/initialized`` POST finishes
  before any later request starts. Each request gets its own task, so a slow
  ``tools/call`` never holds up the next one.
- What the server answers — a JSON body, or the ``message`` events of an SSE
  response stream, or of the GET stream for server-initiated messages — is decoded
  once, here, and queued as messages in the ``Inbox`` (``http_link.py``) that
  ``receive()`` reads. A body or an event that does not decode fails the connection.
- A server's request or notification on a POST's SSE stream belongs to that POST's
  request (SEP-2260) and is tagged with it (``related``); one on the GET stream as untied.
- Failures from any task land in that inbox too, so the actor's reader sees the
  first one at once and fails the calls in flight; nothing waits for a timeout.

Session rules (spec "Session Management"): the ``Mcp-Session-Id`` of the initialize
response is sent on every later request, and ``MCP-Protocol-Version`` once the
initialize result (read as it passes through) named it. A 404 on a request that
carried the session means the server forgot the session: the transport closes, and
the actor's next connection attempt makes a new one. A response stream that carried
event ids and ended early is resumed by a GET with ``Last-Event-ID`` after the
server's ``retry`` delay; without ids it is simply lost, and the transport closes.

A stream that broke off (the connection dropped mid-body, as when the server process
dies) is not the server asking to be polled later: the first GET goes at once. If it
gets no answer at all (refused, or reset as the dying server's sockets close), the
server is gone, as it is whenever a later GET is refused (``http_errors.Unreachable``).
The transport closes, so the calls in flight are answered at once; the GET stream is
reopened by the same rules, so a server killed while idle is noticed at once too.

In the 2026-07-28 era every POST also carries ``Mcp-Method`` and ``Mcp-Name``, and a
``tools/call`` the ``Mcp-Param-*`` headers its tool's schema designates, learnt from
the ``tools/list`` answers this transport carried (``param_headers.py``). List changes
come on a listen stream, not the GET stream (``listen_stream.py``; the connection's own: ``held_listens.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeAlias

import attrs
import httpx2
import trio

from actors.log_events import get_logger
from actors.protocol.errors import ProtocolError
from actors.protocol.http_framing import (
    decode_body,
    decode_event,
    encode_body,
    is_answer,
    request_headers,
    what,
)
from actors.protocol.listen import REOPEN_ATTEMPTS, listen_filter
from actors.protocol.messages import UNTIED, Message, Notification, Request, Response
from actors.protocol.param_headers import Designations, listing_designations, param_headers
from actors.protocol.sse import ServerSentEvent, SSEParser
from actors.transport_errors import TransportClosed, TransportError
from actors.transports.held_listens import HeldListens
from actors.transports.http_errors import Unreachable
from actors.transports.http_link import (
    ACCEPT_POST,
    ACCEPT_SSE,
    LAST_EVENT_ID,
    PROTOCOL_VERSION_HEADER,
    SESSION_HEADER,
    FallBack,
    RemoteLink,
    content_type,
    error_answer,
)
from actors.transports.http_status import (
    GetNext,
    Next,
    decide_get,
    decide_post,
    header_safe,
    reconnect_delay,
    reopen_at_once,
)
from actors.transports.listen_stream import ListenStream, keep_open

_log = get_logger("actors.transports.http")

# How long a request's SSE stream may take to end after its answer, to reuse its connection.
_DRAIN_S = 0.25
# How long the notifications/initialized send waits for the GET stream's answer.
GET_OPEN_WAIT_S = 1.0

EventHandler: TypeAlias = Callable[[ServerSentEvent], Awaitable[bool]]


class StreamableHttpTransport:
    """One MCP session over Streamable HTTP; made and torn down by the remote connector."""

    def __init__(self, link: RemoteLink, *, may_fall_back: bool) -> None:
        self._link = link
        self._may_fall_back = may_fall_back
        self._listening = False
        self._get_answered = trio.Event()  # the first GET has its status (or gave up)
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._designations: dict[str, Designations] = {}  # tool -> its parameter headers
        self._listen_for: dict[str, bool] = {}  # the list changes server/discover offered
        self._took_probe = False  # server/discover is in flight or answered 2xx: Streamable HTTP
        self._held = HeldListens(link, lambda: self._headers(ACCEPT_POST))

    def describe(self) -> str:
        return f"streamable-http {self._link.safe_url}"

    # ------------------------------------------------------------------ sending

    async def send(self, messages: Sequence[Message]) -> None:
        """POST each message; failures go to the inbox. Unencodable (nothing sent) if
        a message cannot be encoded."""
        bodies = [encode_body(message) for message in messages]
        for index, (message, body) in enumerate(zip(messages, bodies, strict=True)):
            if self._link.inbox.failed:
                return  # the reader reports the failure; later messages have nowhere to go
            try:
                await self._send_one(message, body)
            except FallBack as fallback:
                fallback.messages = list(messages[index:])
                raise
            except TransportError as exc:
                self._link.inbox.fail(exc)
                return

    async def _send_one(self, message: Message, body: bytes) -> None:
        if self._held.takes(message):  # a listen request of the connection's, or its cancellation
            pass
        elif not isinstance(message, Request):
            await self._notify(body, message)
        elif message.method == "initialize":
            await self._initialize(body, message)
        else:
            self._link.nursery.start_soon(self._request, body, message)

    def _headers(self, accept: str, *, post: bool = True, last_event_id: str = "") -> dict[str, str]:
        headers = {"Accept": accept, **({"Content-Type": "application/json"} if post else {})}
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        if self.protocol_version is not None:
            headers[PROTOCOL_VERSION_HEADER] = self.protocol_version
        if last_event_id and header_safe(last_event_id, spaces=True):
            headers[LAST_EVENT_ID] = last_event_id
        return headers

    async def _initialize(self, body: bytes, request: Request) -> None:
        """POST initialize and wait for the status (not the body), which decides the
        fallback to legacy SSE and the session id. A server that took our
        ``server/discover`` POST (unanswered, or answered 2xx) speaks Streamable HTTP:
        its 4xx refuses ``initialize`` (the probe's late answer may settle the era)."""
        self.session_id = self.protocol_version = None
        link = self._link
        response = await link.open(
            "POST", link.url, self._headers(ACCEPT_POST), "initialize", content=body,
            read_timeout=link.spec.init_timeout_s,
        )  # fmt: skip
        try:
            took, status = self._took_probe, response.status_code
            fall_back = self._may_fall_back and not took
            step = decide_post(status, initialize=True, has_session=False, may_fall_back=fall_back)
            if step is Next.FALL_BACK:
                raise FallBack(status)
            if step is not Next.READ_BODY and not (took and step is Next.REFUSED):
                raise link.status_error(step, status, "initialize")
            session = response.headers.get(SESSION_HEADER)
            if session is not None and not header_safe(session):
                raise TransportError(f"mcp server {link.name} sent an unusable {SESSION_HEADER} header")
            self.session_id = session
        except BaseException:
            await link.close(response)
            raise
        link.nursery.start_soon(self._settle, response, request)

    async def _request(self, body: bytes, request: Request) -> None:
        """Task: POST one request and pass its answer on."""
        link = self._link
        self._took_probe |= (probe := request.method == "server/discover")  # until its answer says otherwise
        with trio.move_on_after(link.request_bound_s):
            try:
                headers = {**self._headers(ACCEPT_POST), **self._request_headers(request)}
                self._listen_once_adopted(request, headers)
                response = await link.open("POST", link.url, headers, request.method, content=body)
                if probe and not 200 <= response.status_code < 300:
                    self._took_probe = False
            except TransportError as exc:
                link.inbox.fail(exc)
                return
            await self._answered(response, request)

    def _listen_once_adopted(self, request: Request, headers: dict[str, str]) -> None:
        """The first request of the per-request era after a ``server/discover`` (or an
        ``initialize`` answered with that era's version) that offered list changes opens
        the ``subscriptions/listen`` stream, with its ``_meta``."""
        wanted = bool(self._listen_for) and not self._listening and "Mcp-Method" in headers
        if wanted and request.method != "server/discover" and isinstance(request.params, dict):
            self._listening = True
            stream = ListenStream(
                self._link, lambda: self._headers(ACCEPT_POST), self._link.inbox.put, self._listen_for
            )
            self._link.nursery.start_soon(stream.run, request.params.get("_meta") or {})

    def _request_headers(self, request: Request) -> dict[str, str]:
        """The per-request era's headers, with a ``tools/call``'s ``Mcp-Param-*`` ones."""
        headers = request_headers(request)
        params = request.params
        if headers and request.method == "tools/call" and isinstance(params, dict):
            name = params.get("name")
            designated = self._designations.get(name) if isinstance(name, str) else None
            if designated:
                headers.update(param_headers(designated, params.get("arguments")))
        return headers

    async def _settle(self, response: httpx2.Response, request: Request) -> None:
        """:meth:`_answered` bounded by ``request_bound_s`` (a request's task has that bound
        already): past the call cap the caller has long been answered; a stream is dropped."""
        with trio.move_on_after(self._link.request_bound_s):
            await self._answered(response, request)

    async def _answered(self, response: httpx2.Response, request: Request) -> None:
        """Read a request's answer (JSON body or SSE stream); always close the response."""
        link = self._link
        try:
            await self._answer(response, request)
        except (TransportError, ProtocolError) as exc:
            link.inbox.fail(exc)
        finally:
            await link.close(response)

    async def _answer(self, response: httpx2.Response, request: Request) -> None:
        link = self._link
        status = response.status_code
        doing = request.method
        step = decide_post(
            status, initialize=False, has_session=self.session_id is not None, may_fall_back=False
        )
        if step is Next.READ_BODY:
            kind = content_type(response)
            if kind == "application/json":
                await self._deliver(decode_body(await link.read_body(response, doing)), request)
            elif kind == "text/event-stream":
                await self._read_stream(response, request)
            else:
                await link.inbox.put([error_answer(request.id, link.refusal(status, doing, kind))])
        elif step is Next.ACCEPTED:
            await link.inbox.put([error_answer(request.id, link.refusal(status, doing, "no answer"))])
        elif step is Next.REFUSED:
            await link.inbox.put([await link.refused_answer(response, request.id, doing)])
        else:
            raise link.status_error(step, status, doing)

    async def _notify(self, body: bytes, message: Message) -> None:
        """POST a notification or a response and wait for the 202."""
        link = self._link
        doing = what(message)
        response = await link.open(
            "POST", link.url, self._headers(ACCEPT_POST), doing, content=body,
            read_timeout=link.spec.call_timeout_s,
        )  # fmt: skip
        try:
            status = response.status_code
            step = decide_post(status, initialize=False, has_session=self.session_id is not None)
            if step is Next.REFUSED:
                _log.debug("%s refused with HTTP %d", doing, status, extra=link.log_fields)
            elif step not in (Next.ACCEPTED, Next.READ_BODY):
                raise link.status_error(step, status, doing)
        finally:
            await link.close(response)
        if doing == "notifications/initialized" and not self._listening:
            self._listening = True
            link.nursery.start_soon(self._listen)
            # A server may send a request that belongs to no call on the GET stream and
            # drop it while none is open (the TypeScript SDK does): let tools/list and
            # the calls wait for the stream's answer, briefly.
            with trio.move_on_after(GET_OPEN_WAIT_S):
                await self._get_answered.wait()

    # ---------------------------------------------------------------- receiving

    async def _deliver(self, messages: list[Message], answering: Request | None) -> bool:
        """Queue decoded messages for the actor; True if one answered ``answering``."""
        answered = False
        related = UNTIED if answering is None else answering.id  # what a server's message belongs to
        messages = [
            attrs.evolve(m, related=related) if isinstance(m, Request | Notification) else m for m in messages
        ]
        for message in messages:
            if answering is not None and is_answer(message, answering):
                answered = True
                if isinstance(message, Response):
                    self._learn(answering.method, message)
        if messages:
            await self._link.inbox.put(messages)
        return answered

    def _learn(self, method: str, answer: Response) -> None:
        """What an answer teaches: the list changes offered by one that opens an era
        (used once the per-request era is spoken: an ``initialize`` may name it too),
        the protocol version of ``initialize``'s, and the tools' parameter headers of
        ``tools/list``'s (``param_headers.py``)."""
        result = answer.result
        if method in ("initialize", "server/discover"):
            self._listen_for = listen_filter(result)
        version = result.get("protocolVersion")
        if method == "initialize" and isinstance(version, str) and header_safe(version):
            self.protocol_version = version
        elif method == "tools/list":
            for tool, designated in listing_designations(result).items():
                if designated is None:
                    self._designations.pop(tool, None)
                else:
                    self._designations[tool] = designated

    async def _read_stream(self, response: httpx2.Response, request: Request) -> None:
        """An SSE answer to a request: pass its messages on until the answer came.

        Ended early: resumed if the server gave event ids, else the connection is lost.
        """

        async def handle(event: ServerSentEvent) -> bool:
            return await self._deliver(decode_event(event), request)

        parser = SSEParser()
        dropped = False
        try:
            if await self._link.pump(response, parser, handle, request.method, drain_s=_DRAIN_S):
                return
        except TransportClosed:
            if not parser.last_event_id:
                raise
            dropped = True
        if not parser.last_event_id:
            raise TransportClosed(
                f"mcp server {self._link.name} ended the stream answering {request.method} before the answer"
            )
        await self._resume(request, parser, handle, at_once=dropped)

    async def _resume(
        self, request: Request, parser: SSEParser, handle: EventHandler, *, at_once: bool
    ) -> None:
        """GET with ``Last-Event-ID`` until the answer: after the server's ``retry``
        delay, but ``at_once`` after a stream that broke off (see the module docstring).
        A refused connection raises :class:`Unreachable`: the server is gone."""
        failures = 0
        while failures < REOPEN_ATTEMPTS:
            if not at_once:
                await trio.sleep(reconnect_delay(parser.retry))
            before = parser.last_event_id
            parser = SSEParser(last_event_id=before, retry=parser.retry)
            doing = f"resuming {request.method}"
            step, answered = await self._get(parser, handle, doing, reopening=True, strict=at_once)
            if answered:
                return
            if step is GetNext.NO_STREAM:
                break  # 405: the server cannot resume streams after all
            at_once = reopen_at_once(step, after_at_once=at_once)
            opened = step in (GetNext.LISTEN, GetNext.DROPPED)
            failures = 0 if opened and parser.last_event_id != before else failures + 1
        raise TransportClosed(
            f"mcp server {self._link.name} dropped the stream answering {request.method} "
            "and it could not be resumed"
        )

    async def _listen(self) -> None:
        """Task: the optional GET stream for server-initiated messages, reopened with
        ``Last-Event-ID`` after the server's ``retry`` delay whenever it ends."""

        async def handle(event: ServerSentEvent) -> bool:
            await self._deliver(decode_event(event), None)
            return False

        parser = SSEParser()

        async def attempt(reopening: bool, strict: bool) -> tuple[GetNext, int | None]:
            nonlocal parser
            parser = SSEParser(last_event_id=parser.last_event_id, retry=parser.retry)
            step, _ = await self._get(
                parser, handle, "the notification stream", reopening=reopening, strict=strict
            )
            return step, parser.retry

        await keep_open(self._link, attempt, "the notification stream")

    async def _get(
        self, parser: SSEParser, handle: EventHandler, doing: str, *, reopening: bool, strict: bool
    ) -> tuple[GetNext, bool]:
        """One GET that should open an SSE stream: the step taken, and whether ``handle``
        saw what it waited for. A stream that ended counts as LISTEN, one that broke
        off as DROPPED, a request that failed as RETRY. A refused connection
        (:class:`Unreachable`), auth failures, a lost session or a lost stream raise.

        ``strict``: the server answered a moment ago (this GET follows the handshake,
        or a stream that broke off). Then a request that gets no answer at all raises
        too: the server died meanwhile (its dying listening socket may still take the
        connection, only to reset it)."""
        link = self._link
        headers = self._headers(ACCEPT_SSE, post=False, last_event_id=parser.last_event_id)
        try:
            response = await link.open("GET", link.url, headers, doing, head_timeout=link.spec.call_timeout_s)
        except TransportClosed as exc:
            if strict or isinstance(exc, Unreachable):
                raise
            return GetNext.RETRY, False
        finally:
            self._get_answered.set()
        try:
            status = response.status_code
            step = decide_get(status, reopening=reopening, has_session=self.session_id is not None)
            if step is GetNext.LISTEN and content_type(response) != "text/event-stream":
                step = GetNext.NO_STREAM
            if step in (GetNext.AUTH_FAILED, GetNext.SESSION_EXPIRED, GetNext.LOST):
                raise link.status_error(step.as_post(), status, doing)
            if step is GetNext.LISTEN:
                try:
                    return step, await link.pump(response, parser, handle, doing)
                except TransportClosed:
                    return GetNext.DROPPED, False
            return step, False
        finally:
            await link.close(response)

    # ----------------------------------------------------------------- teardown

    async def end_session(self) -> None:
        """DELETE the session (a 405 means the server keeps sessions itself). Called by
        the connector's shielded, bounded teardown; any failure is only logged."""
        if self.session_id is None:
            return
        link = self._link
        try:
            response = await link.open(
                "DELETE", link.url, self._headers(ACCEPT_POST, post=False), "DELETE",
                read_timeout=link.spec.shutdown_grace_s,
            )  # fmt: skip
        except TransportError as exc:
            _log.debug("session DELETE failed: %s", exc, extra=link.log_fields)
            return
        await link.close(response)
        if response.status_code not in (200, 202, 204, 404, 405):
            _log.debug("session DELETE answered HTTP %d", response.status_code, extra=link.log_fields)
        self.session_id = None
