"""One request to a connection actor's mailbox, and its one answer.

Shared by every request of a turn (``tools/call`` in ``supervisor/calls/turns.py``, the rest
of the surface in ``supervisor/calls/turn_surface.py``): the message carries its reply channel,
and a caller that is cancelled while it waits tells the actor (``CancelCall``), which
tells the server.
"""

from __future__ import annotations

import trio

from actors.connection.messages import CallFailed, CallOutcome, CallTool, CancelCall
from actors.mailbox import try_send
from actors.router.catalog import ServerView


async def dispatch(
    view: ServerView, call: CallTool, answers: trio.MemoryReceiveChannel[CallOutcome]
) -> CallOutcome:
    """Send one call to its connection actor's mailbox (without a yield unless the
    mailbox is full) and wait for the one answer."""
    mailbox = view.mailbox
    try:
        if not try_send(mailbox, call):  # full (or gone: then send says which)
            await mailbox.send(call)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return CallFailed("unavailable", f"mcp server {view.name} is unavailable")
    try:
        return await answers.receive()
    except trio.Cancelled:
        try_send(mailbox, CancelCall(call.reply))
        raise
