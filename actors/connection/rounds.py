"""Multi round-trip calls (SEP-2322) on one connection: the rounds between an "input
required" answer and the call's retry.

A call of the per-request era may be answered with the input the server needs
(``actors/protocol/rounds.py``). Its entry then leaves the wire (``InFlightTable.park``)
and a task in the connection's nursery, never the actor's own task, asks the host's
handler for every input, all at once (the calling session's first, then the
supervisor-level one: the chain of ``server_requests.py``); then the call is sent again, under a
new request id, with the answers and the echoed request state. Each exchange keeps
its own entry and state, so parallel calls never see each other's.

Time: the handler's wait is on no sliding deadline (``call_timeout`` starts afresh
with the retry, as after a progress notification), but the call's cap (``max_call``,
from the first send) covers the whole exchange and stops the handler. A caller that
gives up stops the handler too, and no retry is sent. Whoever takes the entry back
from the table answers the caller, so every call is answered exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import trio

from actors.connection.calls import InFlight, InFlightTable
from actors.connection.client_side import INPUT_KEY, ServerRequestHandler
from actors.connection.messages import CallFailed, CallOutcome, CallTool
from actors.log_events import get_logger
from actors.mailbox import answer
from actors.protocol.rounds import MAX_ROUNDS, InputRequest, InputRequired, state_only_delay

log = get_logger("actors.connection")

Resend = Callable[[InFlight, Mapping[str, Mapping[str, Any]], "str | None"], None]
"""Send a waiting call again: ``(entry, answers by key, request state)``."""
HandlerFor = Callable[[CallTool], ServerRequestHandler | None]
"""Who answers the server's requests for one call (None: nobody)."""


class RoundTrips:
    """The exchanges of one connection's calls that asked for input."""

    __slots__ = ("_handler_for", "_inflight", "_nursery", "_resend", "name")

    def __init__(
        self,
        name: str,
        inflight: InFlightTable,
        nursery: trio.Nursery,
        handler_for: HandlerFor,
        resend: Resend,
    ) -> None:
        self.name = name
        self._inflight = inflight
        self._nursery = nursery
        self._handler_for = handler_for
        self._resend = resend

    def begin(self, entry: InFlight, required: InputRequired) -> CallOutcome | None:
        """A call (taken off the table) was answered "input required": start a round,
        or return the call's answer when none can start."""
        entry.rounds += 1
        tool = entry.call.tool
        if entry.rounds > MAX_ROUNDS:
            return CallFailed(
                "server_error",
                f"mcp server {self.name} still asked for input after {MAX_ROUNDS} rounds "
                f"of tools/call {tool}",
            )
        handler = self._handler_for(entry.call)
        if required.requests and handler is None:
            return CallFailed(
                "server_error",
                f"mcp server {self.name} needs input to finish tools/call {tool} "
                f"({required.describe()}), and no handler for server requests is attached "
                "(sup.session(sampling=..., elicitation=..., roots=...) or "
                "Supervisor.open(server_requests=...))",
            )
        self._inflight.park(entry)
        self._nursery.start_soon(self._round, entry, required, handler)
        return None

    async def _round(
        self, entry: InFlight, required: InputRequired, handler: ServerRequestHandler | None
    ) -> None:
        answers: dict[str, Mapping[str, Any]] = {}
        failure: CallFailed | None = None
        with trio.CancelScope(deadline=entry.hard_deadline) as scope:
            entry.scope = scope
            if required.requests:
                assert handler is not None, "begin starts a round with requests only with a handler"
                failure = await self._ask_host(handler, entry, required.requests, answers)
            else:  # only state: the server is still working; ask again shortly
                await trio.sleep(state_only_delay(entry.rounds))
        entry.scope = None
        if not self._inflight.unpark(entry):
            return  # cancelled, or the connection died: answered already
        if scope.cancelled_caught:
            failure = CallFailed(
                "timeout",
                f"mcp server {self.name} did not finish tools/call {entry.call.tool} within "
                f"{entry.max_s:g} s (waiting for the host's input: {required.describe()})",
            )
        if failure is not None:
            answer(entry.call.reply, failure)
        else:
            self._resend(entry, answers, required.state)

    async def _ask_host(
        self,
        handler: ServerRequestHandler,
        entry: InFlight,
        requests: tuple[InputRequest, ...],
        answers: dict[str, Mapping[str, Any]],
    ) -> CallFailed | None:
        """Every input at once; the first that cannot be had stops the others."""
        failures: list[CallFailed] = []

        async def one(request: InputRequest, siblings: trio.CancelScope) -> None:
            failure = await self._ask_one(handler, entry, request)
            if isinstance(failure, CallFailed):
                failures.append(failure)
                siblings.cancel()
            else:
                answers[request.key] = failure

        async with trio.open_nursery() as nursery:
            for request in requests:
                nursery.start_soon(one, request, nursery.cancel_scope)
        return failures[0] if failures else None

    async def _ask_one(
        self, handler: ServerRequestHandler, entry: InFlight, request: InputRequest
    ) -> Mapping[str, Any] | CallFailed:
        tool, method = entry.call.tool, request.method
        token = INPUT_KEY.set(request.key)
        try:
            result = await handler(self.name, method, dict(request.params))
        except Exception as exc:  # a host bug fails this call, never the connection
            log.warning(
                "server request handler failed",
                exc_info=exc,
                extra={"fields": {"server": self.name, "method": method, "tool": tool}},
            )
            return CallFailed(
                "server_error",
                f"the host's handler failed on {method}, which mcp server {self.name} "
                f"needs for tools/call {tool}",
            )
        finally:
            INPUT_KEY.reset(token)
        if result is None:
            return CallFailed(
                "server_error",
                f"mcp server {self.name} needs {method} ({request.key}) to finish tools/call {tool}, "
                "which the host's handler does not handle",
            )
        return result
