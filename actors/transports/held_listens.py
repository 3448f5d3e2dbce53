"""The listen requests a connection sends itself over Streamable HTTP: held open, and
closed when the connection cancels them.

A resource subscription of the 2026-07-28 era is a ``subscriptions/listen`` request
the connection keeps open while the URI has subscribers
(``actors/connection/resource_listens.py``). Over HTTP such a request is a POST whose
SSE stream stays open, so it is not one of the transport's requests: those are cut
off after the call cap (``request_bound_s``), and their cancellation is a
``notifications/cancelled`` POST, which the era's servers drop (they take the closing
of the request's stream for it). Here each is held without a bound, read by
``listen_stream.py``'s ``ListenStream.once`` (its acknowledgement and notifications
go to the actor's inbox as any server message does), and the connection's
``notifications/cancelled`` naming it closes its stream instead of being POSTed. Its
end is always answered, so the connection hears of it: with the server's answer, or,
when none came, with an empty result (a stream that ended) or an error (a server that
opened none). A POST that gets no answer at all fails the transport, as any request's
does.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from actors.protocol.errors import ProtocolError
from actors.protocol.listen import LISTEN
from actors.protocol.messages import Message, Notification, Request, RequestId, Response
from actors.protocol.sse import SSEParser
from actors.transport_errors import TransportError
from actors.transports.http_link import RemoteLink, error_answer
from actors.transports.http_status import GetNext
from actors.transports.listen_stream import ListenStream


class HeldListens:
    """One transport's listen requests of the connection (see the module docstring)."""

    def __init__(self, link: RemoteLink, headers: Callable[[], dict[str, str]]) -> None:
        self._link = link
        self._headers = headers  # the transport's headers for a POST
        self._held: dict[RequestId, trio.CancelScope] = {}

    def takes(self, message: Message) -> bool:
        """Is ``message`` one for this module: a listen request (held from now on), or
        the cancellation of a held one (its stream is closed, nothing is POSTed)?"""
        if isinstance(message, Request) and message.method == LISTEN:
            scope = self._held[message.id] = trio.CancelScope()
            self._link.nursery.start_soon(self._hold, message, scope)
            return True
        if isinstance(message, Notification) and message.method == "notifications/cancelled":
            named = message.params.get("requestId") if isinstance(message.params, dict) else None
            held = self._held.pop(named, None) if isinstance(named, int | str) else None
            if held is not None:
                held.cancel()
                return True
        return False

    async def _hold(self, request: Request, scope: trio.CancelScope) -> None:
        """Task body: one listen request, from its POST to its end (or its cancellation)."""
        link = self._link
        stream = ListenStream(link, self._headers, link.inbox.put, {})
        try:
            with scope:
                step = await stream.once(request, SSEParser(), reopening=False, strict=True)
                answer = stream.answer
                if answer is None and step is GetNext.NO_STREAM:
                    answer = error_answer(request.id, f"mcp server {link.name} opened no {LISTEN} stream")
                await link.inbox.put([answer or Response(request.id, {})])
        except (TransportError, ProtocolError) as exc:
            link.inbox.fail(exc)
        finally:
            if self._held.get(request.id) is scope:
                del self._held[request.id]
