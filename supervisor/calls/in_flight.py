"""Every call in flight under a server-assigned id, so an operator (or the call's own
tenant) can list them (``GET /v1/calls``) and cancel one (``POST
/v1/calls/{call_id}/cancel``) without knowing the client's request id.

The id is a counter of this process (``c1``, ``c2``, …): cheap, never reused while the
process runs, and meaningless to another replica. A call keeps its number; the text
``c<number>`` is made only when it is listed or named (the call path pays for no
string), and the start time is the caller's own (no second clock read). Only a call that may wait (an
approval, its server) is registered: one refused on the way is over before anyone
could list it. A cancel of a call at its server is a ``CancelCall`` to its connection
actor, as for a request id (the server gets ``notifications/cancelled``); one that
waits for an approval has a cancel scope of its own (entering a scope costs every
call a few µs, so only those get one). Either way the call ends in a ``cancelled``
envelope whose audit row names who cancelled it.
"""

from __future__ import annotations

import itertools

import attrs
import trio

from actors.connection.messages import CallOutcome, CancelCall, ConnectionMessage
from actors.mailbox import try_send


@attrs.define(slots=True, eq=False)
class LiveCall:
    """One call in flight; ``cancelled_by`` is set by the cancel that ends it."""

    number: int
    started: float
    tenant: str
    session: str
    person: str
    server: str
    tool: str
    scope: trio.CancelScope | None = None
    """While it waits for an approval (``TurnAudit._journaled`` sets it)."""
    mailbox: trio.MemorySendChannel[ConnectionMessage] | None = None
    reply: trio.MemorySendChannel[CallOutcome] | None = None
    """Once it is sent to its server (``Turn._go`` sets them)."""
    cancelled_by: str | None = None

    @property
    def id(self) -> str:
        """The id the API lists and cancels by."""
        return f"c{self.number}"


class CallsInFlight:
    """The calls in flight by id, in the order they began."""

    def __init__(self) -> None:
        self._calls: dict[int, LiveCall] = {}
        self._numbers = itertools.count(1)

    def open(
        self, started: float, tenant: str, session: str, person: str, server: str, tool: str
    ) -> LiveCall:
        """Register a call that began at ``started`` (Trio time), under a fresh id."""
        call = LiveCall(next(self._numbers), started, tenant, session, person, server, tool)
        self._calls[call.number] = call
        return call

    def close(self, call: LiveCall) -> None:
        """The call ended."""
        self._calls.pop(call.number, None)

    def listed(self, tenant: str | None) -> list[LiveCall]:
        """The calls of ``tenant`` (None: of every tenant), oldest first."""
        return [c for c in self._calls.values() if tenant is None or c.tenant == tenant]

    def cancel(self, call_id: str, tenant: str | None, by: str) -> bool:
        """Cancel the call ``call_id`` of ``tenant`` (None: of any tenant) on behalf of
        ``by``; False when there is no such call (another tenant's is none)."""
        number = call_id[1:]
        written = call_id[:1] == "c" and number.isascii() and number.isdigit()
        call = self._calls.get(int(number)) if written else None
        if call is None or call.id != call_id or (tenant is not None and call.tenant != tenant):
            return False  # (``c01`` names no call: ids are written one way)
        if call.cancelled_by is None:
            call.cancelled_by = by
        if call.scope is not None:
            call.scope.cancel()
        elif call.mailbox is not None and call.reply is not None:
            try_send(call.mailbox, CancelCall(call.reply, f"cancelled by {by}"))
        # else: not sent yet, and then never sent (Turn._go looks at cancelled_by first)
        return True

    def __len__(self) -> int:
        return len(self._calls)
