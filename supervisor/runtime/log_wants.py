"""Which server log messages the sessions' clients want, told to the shared servers.

Each session says the least severe level its clients want (``Session.want_logs``: the
MCP gateway's handshake-era client by ``logging/setLevel``, a 2026-07-28 client for
as long as a request of its that asked runs); ``LogWants`` keeps the most verbose of
them (``LogDemand``, ``actors/connection/log_levels.py``) and, when that changes,
sends it to every shared server's connection actor (``WantLogs``), one change at a
time, so the last message each actor gets is the current level. A shared server's
actor started later is given the current level (``ConnectionFactory.actor``); a
session's private servers are told by their session, with its own level.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import suppress

import trio

from actors.connection.log_levels import LogDemand
from actors.connection.messages import ConnectionMessage, WantLogs


class LogWants:
    """The sessions' levels and the shared connection actors' mailboxes (``bind``)."""

    def __init__(self) -> None:
        self._demand = LogDemand()
        self._lock = trio.Lock()
        self._mailboxes: Callable[[], Iterable[trio.MemorySendChannel[ConnectionMessage]]] = tuple

    @property
    def level(self) -> str | None:
        """The most verbose level any session's clients want now (None: none)."""
        return self._demand.level

    def bind(self, mailboxes: Callable[[], Iterable[trio.MemorySendChannel[ConnectionMessage]]]) -> None:
        """Where the shared servers' actors read (asked anew at each change)."""
        self._mailboxes = mailboxes

    async def want(self, session: str, level: str | None) -> None:
        """``session``'s clients want ``level`` from now on (None: nothing; a session that
        ends says so). Returns once every shared actor was told of a change."""
        async with self._lock:
            if not self._demand.want(session, level):
                return
            for mailbox in self._mailboxes():
                # A server removed meanwhile has nothing to be told.
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await mailbox.send(WantLogs(self._demand.level))
