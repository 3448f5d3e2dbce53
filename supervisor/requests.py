"""Requests in flight, by id, so an operator can cancel one (``POST /v1/requests/{rid}/cancel``).

A cancelled request that has reached its server is cancelled there
(``notifications/cancelled``) and answered ``cancelled``; one cancelled before it was
sent is never sent.
"""

from __future__ import annotations

import attrs
import trio

from actors.connection.messages import CallOutcome, CancelCall, ConnectionMessage
from actors.mailbox import try_send


@attrs.define(eq=False)
class InFlightRequest:
    """One call a client may still cancel."""

    id: str
    tenant: str
    tool: str
    mailbox: trio.MemorySendChannel[ConnectionMessage] | None = None
    reply: trio.MemorySendChannel[CallOutcome] | None = None
    cancelled: bool = False


class RequestRegistry:
    """Calls by request id, per tenant."""

    def __init__(self) -> None:
        self._requests: dict[str, InFlightRequest] = {}

    def open(self, request_id: str, tenant: str, tool: str) -> InFlightRequest:
        """Register a call under a fresh id (a reused id is refused)."""
        if request_id in self._requests:
            raise ValueError(f"request id {request_id!r} is already in flight")
        request = InFlightRequest(request_id, tenant, tool)
        self._requests[request_id] = request
        return request

    def close(self, request_id: str) -> None:
        """The call ended."""
        self._requests.pop(request_id, None)

    def cancel(self, request_id: str, tenant: str | None) -> bool:
        """Cancel a call of ``tenant`` (None: any); False when there is no such call."""
        request = self._requests.get(request_id)
        if request is None or (tenant is not None and request.tenant != tenant):
            return False
        request.cancelled = True
        if request.mailbox is not None and request.reply is not None:
            try_send(request.mailbox, CancelCall(request.reply, "cancelled by an operator"))
        return True

    def __len__(self) -> int:
        return len(self._requests)
