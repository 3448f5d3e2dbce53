"""The SERVER span of the admin API's call endpoints (a tool call, streamed or not, a
resource read, a prompt get, a completion): the request's ``traceparent`` header is
its parent, and the envelope's code its ``error.type``. With traces off, one
attribute check and no header is read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping

import attrs
from quart import request

from actors.protocol.http_framing import TRACE_META_KEYS
from actors.router.envelope import Envelope
from supervisor.runtime.tracing import TRACING


@attrs.frozen(slots=True)
class CallArrival:
    """What a call's span needs of its HTTP request, read while the request is current
    (a streamed call runs on after it)."""

    headers: Mapping[str, str]
    client: tuple[str, int] | None


def arrival() -> CallArrival | None:
    """The current request's trace headers and client, or None while traces are off."""
    if TRACING.active is None:
        return None
    headers = {key: value for key in TRACE_META_KEYS if (value := request.headers.get(key)) is not None}
    peer = request.scope.get("client")
    client = (str(peer[0]), int(peer[1])) if isinstance(peer, list | tuple) and len(peer) == 2 else None
    return CallArrival(headers, client)


async def traced(
    method: str, target: str, came: CallArrival | None, pending: Awaitable[Envelope]
) -> Envelope:
    """``await pending`` inside the SERVER span of ``method`` on ``target``."""
    tracing = TRACING.active
    if tracing is None or came is None:
        return await pending
    with tracing.server_span(method, target, None, "tcp", headers=came.headers, client=came.client) as trace:
        envelope = await pending
        trace.ended(None if envelope.ok or envelope.error is None else envelope.error.code)
        return envelope
