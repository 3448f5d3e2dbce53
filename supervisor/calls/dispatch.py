"""One request to a connection actor's mailbox, and its one answer.

Shared by every request of a turn (``tools/call`` in ``supervisor/calls/turns.py``, the rest
of the surface in ``supervisor/calls/turn_surface.py``): the message carries its reply channel,
and a caller that is cancelled while it waits tells the actor (``CancelCall``), which
tells the server.
"""

from __future__ import annotations

import attrs
import trio

from actors.connection.messages import CallOutcome, CallTool, CancelCall, unavailable, unavailable_text
from actors.mailbox import try_send
from actors.router.catalog import ServerView
from supervisor.runtime.tracing import TRACING


async def dispatch(
    view: ServerView, call: CallTool, answers: trio.MemoryReceiveChannel[CallOutcome]
) -> CallOutcome:
    """Send one call to its connection actor's mailbox (without a yield unless the
    mailbox is full) and wait for the one answer; traced, inside its CLIENT span, whose
    context the actor puts in the request's ``_meta``."""
    tracing = TRACING.active
    if tracing is None:
        return await _dispatch(view, call, answers)
    with tracing.client_span(view.spec, call) as trace:
        outcome = await _dispatch(view, attrs.evolve(call, trace=trace), answers)
        trace.answered(outcome)
        return outcome


async def _dispatch(
    view: ServerView, call: CallTool, answers: trio.MemoryReceiveChannel[CallOutcome]
) -> CallOutcome:
    mailbox = view.mailbox
    try:
        if not try_send(mailbox, call):  # full (or gone: then send says which)
            await mailbox.send(call)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return unavailable(view.name)
    try:
        return await answers.receive()
    except trio.Cancelled:
        try_send(mailbox, CancelCall(call.reply))
        raise


def unavailable_in_turn(server: str, state: str) -> str:
    """Why a request is refused for the whole turn: its server was down (``state``)
    when the turn began (docs/turns.md)."""
    return unavailable_text(
        server, f"in this turn ({state} when it began); a later turn sees it once it is back"
    )
