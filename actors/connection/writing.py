"""The write path of one connection: the backlog, the writer task and write-at-once,
in one object.

What the protocol session queued leaves in one of two ways. A lone call on a
transport that can write without waiting (it declares ``writes_at_once``: stdio's
``send_nowait``) is written at once by the task that made it: no task switch
(``call_queued`` decides). Everything else is left to a writer task, which exists
only while something is queued (an idle connection keeps none, ~2.6 KB each) and
runs after the current task yields, so what is queued meanwhile (calls made together)
leaves in the same write. The backlog is the session's queue of messages, plus, on
stdio, the bytes of a line the pipe took only in part, which the transport keeps and
writes first (``flush``). A message JSON cannot carry is left out and reported; the
others go. None of this is connection state: whether to send at all is the state
machine's call (``states.py``). Why a caller never writes its own call, with the
numbers: "The stdio write path and the mailbox hop" in ``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import trio

from actors.protocol.errors import Unencodable
from actors.protocol.messages import Message
from actors.protocol.session import ClientSession
from actors.transport_errors import TransportError
from actors.transports.base import Transport


class WritePath:
    """Moves what one session queued onto one transport, in order."""

    __slots__ = (
        "_nursery",
        "_on_error",
        "_on_unencodable",
        "_session",
        "_transport",
        "answered_last",
        "flush",
        "send_now",
        "writer_running",
        "writing",
    )

    def __init__(
        self,
        transport: Transport,
        session: ClientSession,
        nursery: trio.Nursery,
        on_error: Callable[[TransportError], None],
        on_unencodable: Callable[[Unencodable], None],
    ) -> None:
        self._transport = transport
        self._session = session
        self._nursery = nursery
        self._on_error = on_error
        self._on_unencodable = on_unencodable
        self.writer_running = False  # a writer task exists (it ends when nothing is left)
        self.writing = False  # the writer is inside transport.send
        self.flush = False  # the transport keeps a rest that send_nowait could not write
        self.answered_last = 0  # calls answered by the last read: more than one, callers are many
        # A transport that can write without waiting (stdio's send_nowait), else None.
        self.send_now: Callable[[Sequence[Message]], bool] | None = (
            transport.send_nowait if transport.abilities.writes_at_once else None
        )

    def kick(self) -> None:
        """Something is queued: start a writer unless one is on its way. It runs after
        the current task yields, so what is queued meanwhile leaves with it."""
        if not self.writer_running:
            self.writer_running = True
            self._nursery.start_soon(self._writer)

    def call_queued(self, in_flight: int) -> None:
        """A call was queued (``in_flight`` calls are now). A lone call (the only one in
        flight, after a read that answered at most one) goes out now, from this task:
        no writer wake-up. Calls made together, or by many callers whose answers came
        together, are left to the writer, which sends them in one write."""
        if in_flight > 1 or self.answered_last > 1 or not self.write_now():
            self.kick()

    def write_now(self) -> bool:
        """Write what the session queued without waiting, if the transport can and the
        writer is idle; False when something is left for the writer (then kick it)."""
        send_now = self.send_now
        if send_now is None or self.writing or self.flush:
            return False
        messages = self._session.messages_to_send()
        while True:
            try:
                done = send_now(messages)
            except Unencodable as exc:
                messages = self._left_out(messages, exc)
                continue
            self.flush = not done
            return done

    def _left_out(self, messages: Sequence[Message], exc: Unencodable) -> list[Message]:
        self._on_unencodable(exc)
        return [m for m in messages if m is not exc.message]

    async def _writer(self) -> None:
        try:
            while True:
                messages = self._session.messages_to_send()
                if not messages and not self.flush:
                    return
                self.flush = False
                self.writing = True
                while True:
                    try:
                        await self._transport.send(messages)
                        break
                    except Unencodable as exc:  # nothing was written: the rest goes now
                        messages = self._left_out(messages, exc)
                self.writing = False
        except TransportError as exc:
            self._on_error(exc)
        finally:
            self.writer_running = False
