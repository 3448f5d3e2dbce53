"""A caller's lane to its connection actor: a ``tools/call`` without the mailbox hop.

Calls reach a connection actor through its mailbox: the caller's task puts the call
in, the actor's task wakes, takes it and writes it. On a stdio link the caller may
instead have its call sent from its own task, by the actor's code
(``ConnectionActor.call_directly``), which saves that wake-up. The measurements and
the decision are in docs/architecture.md ("The stdio write path and the mailbox
hop"). What stays the actor's:

- whether to send at all: the state machine's ``call_route`` (a call that would be
  parked or refused goes through the mailbox, which does that);
- order: unless the actor's main task waits on an empty mailbox, the call queues
  behind what was sent before it (a command, other calls), so a ``disable`` sent
  before a call still refuses it;
- the request id and the in-flight entry: the session and the in-flight table are
  the actor's objects, changed by its code; Trio runs one task at a time and nothing
  on this path awaits, so no other task sees them half-changed;
- the link's send lock: the caller's task writes only when the write path is idle
  (no writer inside ``send``, no rest of an earlier write kept); otherwise the
  actor's writer task sends the call with the others.

HTTP requests always go through the mailbox: a remote transport does not declare
``writes_at_once``. A lane outlives the actors that serve it (a shared server's
mailbox and lane survive its restarts); each attaches itself while it runs.
"""

from __future__ import annotations

from typing import Protocol

from actors.connection.messages import CallTool


class DirectCalls(Protocol):
    """What a lane calls: the connection actor now serving it."""

    def call_directly(self, call: CallTool) -> bool: ...


class CallLane:
    """One server's lane; made with its mailbox, held by its views (``ServerView.lane``)."""

    __slots__ = ("_actor",)

    def __init__(self) -> None:
        self._actor: DirectCalls | None = None

    def attach(self, actor: DirectCalls) -> None:
        """``actor`` serves the lane from now on (it has started)."""
        self._actor = actor

    def detach(self, actor: DirectCalls) -> None:
        """``actor`` ends; a newer actor that attached meanwhile stays."""
        if self._actor is actor:
            self._actor = None

    def call(self, call: CallTool) -> bool:
        """Send ``call`` from the calling task: True when it was (its answer comes to
        ``call.reply`` as it would from the mailbox), False when it must go through
        the mailbox (no actor running, the connection not sending calls, or a
        transport that does not write at once)."""
        actor = self._actor
        return actor is not None and actor.call_directly(call)
