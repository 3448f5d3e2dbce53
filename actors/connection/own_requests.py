"""The CLIENT span of a request of the connection's own (a list, a read of its
subscriptions, ``logging/setLevel``, ``server/discover``, ``ping``).

A request made while the connection attempt is open (the first lists) is a child of
the attempt's span; a later one (a list after ``list_changed``) is a root span of its
own, never a child of whatever context the actor's task was started in (an embedding
host that opened the supervisor inside a span of its own). Our only ``ping`` is the
liveness check after a timeout, inside no call: it makes no span, so the pings of a
thousand servers make no traces. The context rides in the request's ``_meta`` (and
over HTTP its headers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from actors.connection.vocabulary import ALIVE
from actors.protocol.messages import RequestId
from actors.protocol.session import ErrorReceived, ResponseReceived
from actors.tracing import Tracing

if TYPE_CHECKING:
    from actors.connection.live import Live


async def traced_request(
    tracing: Tracing,
    live: Live,
    method: str,
    params: dict[str, Any] | None,
    sent: Callable[[RequestId], None] | None,
) -> ResponseReceived | ErrorReceived:
    """``live.send_own`` inside the request's CLIENT span (see the module docstring)."""
    if method == "ping":  # a liveness check: no trace of its own (see the module docstring)
        return await live.send_own(method, params, sent)
    uri = params.get("uri") if params else None
    target = uri if isinstance(uri, str) else ""
    parent = live.attempt_span.parent
    with tracing.request_span(live.name, method, target, parent=parent) as trace:

        def told(request_id: RequestId) -> None:
            trace.sent(request_id, live.session.version)
            if sent is not None:
                sent(request_id)

        answer = await live.send_own(method, params, told, trace.meta)
        if isinstance(answer, ErrorReceived):
            trace.refused(answer.error.code)
        return answer


async def check_alive(live: Live, tool: str) -> None:
    """After a timeout, a hung server (one that answers not even ping) is restarted."""
    with trio.move_on_after(live.spec.ping_timeout_s):
        await live.request("ping")
        live.report(ALIVE)
        return
    live.fail(
        f"mcp server {live.name} did not answer ping within {live.spec.ping_timeout_s:g} s "
        f"after tools/call {tool} timed out"
    )
