"""Who answers a server's request (sampling, elicitation, roots …) on one connection.

A shared connection serves many sessions, so a request must reach the session whose
call it belongs to, and never another. The rule:

- **Tied to a call**: the calling session's handler (``CallTool.client``) answers
  first; if it has none for that method (absent, or it returns None), the
  supervisor-level handler (``Supervisor.open(server_requests=…)``) does; with neither,
  the server gets a JSON-RPC error saying no handler is attached for the method.
- **Untied**: the connection's own handler answers (the supervisor-level one; for a
  ``scope: session`` connection its session's first), or the server gets that error.

How "tied" is known:

- Streamable HTTP: a request that arrived on a POST's SSE stream belongs to that
  POST's request (SEP-2260); the transport tags it (``Request.related``). One on the
  GET stream, or tied to a request that is no call (``tools/list``), is untied.
- stdio and legacy SSE carry nothing on the wire, so: when every call in flight on
  the connection belongs to one session, the request is tied to that session; with
  none in flight, or calls of several sessions, it is untied. Never a guess between
  sessions: a request that could be either's goes to neither.

Multi round-trip calls (``rounds.py``) ask the same chain: the calling session's
handler first, then the supervisor-level one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from actors.connection.calls import InFlightTable
from actors.connection.client_side import ClientSide, RequestRefused, ServerRequestHandler
from actors.connection.messages import CallTool
from actors.log_events import get_logger
from actors.protocol.messages import INTERNAL_ERROR, METHOD_NOT_FOUND, Untied
from actors.protocol.session import ClientSession, ServerRequest

log = get_logger("actors.connection")


def chain(*handlers: ServerRequestHandler | None) -> ServerRequestHandler | None:
    """One handler that asks each of ``handlers`` in turn: the first answer that is
    not None wins (None: none of them handles the method). None when none is given."""
    present = [handler for handler in handlers if handler is not None]
    if len(present) <= 1:
        return present[0] if present else None

    async def first_answer(server: str, method: str, params: Any) -> Mapping[str, Any] | None:
        for handler in present:
            result = await handler(server, method, params)
            if result is not None:
                return result
        return None

    return first_answer


def tied_client(request: ServerRequest, inflight: InFlightTable) -> ClientSide | None:
    """The calling session's side of the call ``request`` is tied to, if any (the
    rule in the module docstring)."""
    related = request.related
    if isinstance(related, Untied):
        return None
    if related is not None:
        entry = inflight.get(related)
        return None if entry is None else entry.call.client
    sides = {entry.call.client for entry in inflight}
    sessions = {side.session if side is not None else None for side in sides}
    if len(sessions) != 1:
        return None  # nothing in flight, or several sessions' calls: untied
    return next(iter(sides))


class ServerRequests:
    """The handlers one connection routes to: its own (untied requests) and, per call,
    the calling session's first."""

    __slots__ = ("_inflight", "fallback")

    def __init__(self, inflight: InFlightTable, fallback: ServerRequestHandler | None) -> None:
        self._inflight = inflight
        self.fallback = fallback

    def for_call(self, call: CallTool) -> ServerRequestHandler | None:
        """Who answers the requests tied to ``call``."""
        return chain(call.client.handler if call.client is not None else None, self.fallback)

    def for_request(self, request: ServerRequest) -> ServerRequestHandler | None:
        """Who answers ``request`` (None: nobody; answer with ``no_handler``)."""
        client = tied_client(request, self._inflight)
        return chain(client.handler if client is not None else None, self.fallback)


def refuse(session: ClientSession, request: ServerRequest) -> None:
    """The answer to a request no handler takes (method not found, saying so)."""
    session.send_error(request.id, METHOD_NOT_FOUND, f"no handler is attached for {request.method}")


async def answer_request(
    server: str,
    session: ClientSession,
    handler: ServerRequestHandler,
    request: ServerRequest,
    sent: Callable[[], None],
) -> None:
    """Sampling, elicitation, roots …: the host's ``handler`` answers (the rule above
    says whose); None means it does not handle that method. Its failure is the
    server's error answer, never ours. ``sent``: the answer is queued (wake the writer)."""
    try:
        result = await handler(server, request.method, request.params)
    except RequestRefused as refused:
        session.send_error(request.id, refused.code, refused.message)
    except Exception as exc:
        log.warning(
            "server request handler failed",
            exc_info=exc,
            extra={"fields": {"server": server, "method": request.method}},
        )
        session.send_error(request.id, INTERNAL_ERROR, f"client failed to handle {request.method}")
    else:
        if result is None:
            refuse(session, request)
        else:
            session.send_response(request.id, result)
    sent()
