"""Requests in flight, by tenant and id, so a client can cancel one
(``POST /v1/requests/{rid}/cancel``).

Ids are chosen by clients, so they are scoped per tenant: two tenants may use the same
id at once, and a tenant never learns (from a 409 or a 404) which ids another one
uses. A cancelled request that has reached its server is cancelled there
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


class RequestInFlight(ValueError):
    """A call named a request id its tenant already has in flight (nothing was sent).
    A ``ValueError``, as it was before it had a name of its own."""

    def __init__(self, request_id: str) -> None:
        super().__init__(f"request id {request_id!r} is already in flight")
        self.request_id = request_id


class RequestRegistry:
    """Calls by (tenant, request id)."""

    def __init__(self) -> None:
        self._requests: dict[tuple[str, str], InFlightRequest] = {}

    def open(self, request_id: str, tenant: str, tool: str) -> InFlightRequest:
        """Register a call under an id fresh for ``tenant`` (a reused id is refused)."""
        if (tenant, request_id) in self._requests:
            raise RequestInFlight(request_id)
        request = InFlightRequest(request_id, tenant, tool)
        self._requests[(tenant, request_id)] = request
        return request

    def close(self, request_id: str, tenant: str) -> None:
        """The call ended."""
        self._requests.pop((tenant, request_id), None)

    def cancel(self, request_id: str, tenant: str | None) -> bool:
        """Cancel the call of ``tenant`` with this id (None: of every tenant); False
        when there is no such call."""
        if tenant is not None:
            found = self._requests.get((tenant, request_id))
            matches = [] if found is None else [found]
        else:
            matches = [r for (_, rid), r in self._requests.items() if rid == request_id]
        for request in matches:
            request.cancelled = True
            if request.mailbox is not None and request.reply is not None:
                try_send(request.mailbox, CancelCall(request.reply, "cancelled by an operator"))
        return bool(matches)

    def __len__(self) -> int:
        return len(self._requests)
