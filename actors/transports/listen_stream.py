"""The ``subscriptions/listen`` stream: the per-request era's channel for list changes.

The 2026-07-28 era has no GET stream and no session. A client that wants to hear
``notifications/tools/list_changed`` POSTs a ``subscriptions/listen`` request whose
SSE answer stays open: the server first sends ``notifications/subscriptions/acknowledged``
(what it agreed to send), then each change notification, and ends the stream with the
request's result only when it shuts the subscription down.

The Streamable HTTP transport opens one such stream once the era is in use (the first
request that carries the era's ``_meta``, after a ``server/discover`` answer, or an
``initialize`` answer naming that era's version, that offered ``listChanged`` for
tools, resources or prompts), for the kinds offered, and copies that request's
``_meta``. The notifications go to the actor's inbox as any other server message does,
and so does each stream's acknowledgement: one after the first says that the stream
was opened again and changes may have gone unheard (a graceful restart of the server
ends it), so the connection reads its lists again (``actors/connection/listener.py``).
The closing result stays here. Reopening follows the GET stream's
rules (``http_status.py``): a stream the server ended is reopened after its ``retry``
delay; one that broke off (the server process died) at once, and if that POST gets no
answer, or is refused, the server is gone: the transport fails, so the calls in flight
are answered at once, as the handshake era's GET stream does. A server that refuses the
request (an error answer, 405) just has no such stream.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from actors.log_events import get_logger
from actors.protocol.errors import ProtocolError
from actors.protocol.http_framing import decode_body, decode_event, encode_body, request_headers
from actors.protocol.listen import ACKNOWLEDGED, LISTEN, REOPEN_ATTEMPTS, listen_params
from actors.protocol.messages import ErrorResponse, Message, Notification, Request, Response
from actors.protocol.sse import ServerSentEvent, SSEParser
from actors.transport_errors import TransportClosed, TransportError
from actors.transports.http_errors import Unreachable
from actors.transports.http_link import RemoteLink, content_type
from actors.transports.http_status import GetNext, decide_get, reconnect_delay, reopen_at_once

_log = get_logger("actors.transports.http")

_ids = itertools.count(1)


def listen_request(meta: Mapping[str, Any], notifications: Mapping[str, bool]) -> Request:
    """A ``subscriptions/listen`` request for ``notifications`` (``listen_filter`` of
    ``actors/protocol/listen.py``), with its own id (a string the session's integer
    ids never collide with)."""
    params = {**listen_params(notifications), "_meta": dict(meta)}
    return Request(id=f"listen-{next(_ids)}", method=LISTEN, params=params)


async def keep_open(
    link: RemoteLink, attempt: Callable[[bool, bool], Awaitable[tuple[GetNext, int | None]]], what: str
) -> None:
    """Task body: keep a stream of server messages open (the GET stream, a listen
    stream). ``attempt(reopening, strict)`` opens it once and reads it to its end: the
    step taken and the server's ``retry``. Reopened after that delay, but at once after
    a stream that broke off; :data:`REOPEN_ATTEMPTS` failures in a row, or an error,
    fail the transport. ``strict`` as in the transport's ``_get``; the first attempt
    follows a request just answered, so it is strict too."""
    opened = at_once = False
    failures = 0
    try:
        while failures < REOPEN_ATTEMPTS:
            step, retry = await attempt(opened, at_once or not opened)
            if step is GetNext.NO_STREAM:
                _log.debug("no %s", what, extra=link.log_fields)
                return
            if step in (GetNext.LISTEN, GetNext.DROPPED):
                opened, failures = True, 0
            else:
                failures += 1
            at_once = reopen_at_once(step, after_at_once=at_once)
            if not at_once:
                await trio.sleep(reconnect_delay(retry))
        raise TransportClosed(f"mcp server {link.name}: {what} dropped and could not be reopened")
    except (TransportError, ProtocolError) as exc:
        link.inbox.fail(exc)


class ListenStream:
    """Task body: keep one listen stream open for a transport (see the module docstring)."""

    def __init__(
        self,
        link: RemoteLink,
        headers: Callable[[], dict[str, str]],
        deliver: Callable[[list[Message]], Awaitable[object]],
        notifications: Mapping[str, bool],
    ) -> None:
        self._notifications = notifications  # what to listen for (``listen_filter``)
        self._link = link
        self._headers = headers  # the transport's headers for a POST
        self._deliver = deliver
        self.answer: Message | None = None  # the server's answer to the last request, if it came

    async def run(self, meta: Mapping[str, Any]) -> None:
        retry: int | None = None

        async def attempt(reopening: bool, strict: bool) -> tuple[GetNext, int | None]:
            nonlocal retry
            parser = SSEParser(retry=retry)
            step = await self.once(
                listen_request(meta, self._notifications), parser, reopening=reopening, strict=strict
            )
            retry = parser.retry
            return step, retry

        await keep_open(self._link, attempt, "the subscriptions/listen stream")

    async def once(self, request: Request, parser: SSEParser, *, reopening: bool, strict: bool) -> GetNext:
        """One listen POST: LISTEN once the server ended the stream it acknowledged,
        DROPPED if it broke off, NO_STREAM if the server does not serve it, RETRY if
        the POST failed. ``strict`` as in the transport's ``_get``: the server answered
        a moment ago, so no answer at all means it died."""
        link = self._link
        headers = {**self._headers(), **request_headers(request)}
        try:
            response = await link.open(
                "POST", link.url, headers, LISTEN, content=encode_body(request),
                head_timeout=link.spec.call_timeout_s,
            )  # fmt: skip
        except TransportClosed as exc:
            if strict or isinstance(exc, Unreachable):
                raise
            return GetNext.RETRY
        try:
            status = response.status_code
            step = decide_get(status, reopening=reopening, has_session=False)
            if step in (GetNext.AUTH_FAILED, GetNext.LOST):
                raise link.status_error(step.as_post(), status, LISTEN)
            if step is not GetNext.LISTEN:
                return step
            kind = content_type(response)
            if kind == "application/json":  # an error answer: the server does not listen
                await self._pass_on(decode_body(await link.read_body(response, LISTEN)), request)
                return GetNext.NO_STREAM
            if kind != "text/event-stream":
                return GetNext.NO_STREAM
            acknowledged = False

            async def handle(event: ServerSentEvent) -> bool:
                nonlocal acknowledged
                messages = decode_event(event)
                acknowledged = acknowledged or any(
                    isinstance(m, Notification) and m.method == ACKNOWLEDGED for m in messages
                )
                return await self._pass_on(messages, request) is not None

            try:
                ended = await link.pump(response, parser, handle, LISTEN)
            except TransportClosed:
                return GetNext.DROPPED if acknowledged else GetNext.RETRY
            if not acknowledged:  # refused (an error answer) or ended before it began
                return GetNext.NO_STREAM if ended else GetNext.RETRY
            return GetNext.LISTEN
        finally:
            await link.close(response)

    async def _pass_on(self, messages: list[Message], request: Request) -> Message | None:
        """Hand the acknowledgement and the change notifications to the actor; keep
        the answer to ``request`` (returned, if it came)."""
        answer: Message | None = None
        rest: list[Message] = []
        for message in messages:
            if isinstance(message, Response | ErrorResponse) and message.id == request.id:
                answer = message
                if isinstance(message, ErrorResponse):
                    _log.debug(
                        "subscriptions/listen refused: %s", message.error.message, extra=self._link.log_fields
                    )
            else:
                rest.append(message)
        if rest:
            await self._deliver(rest)
        if answer is not None:
            self.answer = answer
        return answer
