"""Which of a server's log messages are wanted, by whom, and what the server is asked for.

A level is the least severe message a reader wants (RFC 5424, ``server_log.py``). A
connection's messages have three kinds of readers:

- our own log: the server's ``log_level``, ``own``;
- the clients of the sessions it serves (the MCP gateway's handshake-era clients, by
  their ``logging/setLevel``; a 2026-07-28 client, by its request's level while that
  request runs): the most verbose level any of them wants, ``wanted`` (None: none),
  which the supervisor tells the connection actor (``WantLogs``) when it changes; each
  gateway client then hears only what its own level admits;
- the caller of one call (``ClientSide.log_level``): the messages tied to that call.

The server is asked for the most verbose level anyone may read: in the handshake era
``logging/setLevel`` with ``asked`` (sent again when it changes; ``lister.py``), in
the per-request era, which has no ``logging/setLevel``, each call's ``_meta`` carries
``for_call`` (its caller's level, or ours if more verbose).

``route`` says where one message goes. It is tied to a call when the transport says
so (Streamable HTTP: it came on the stream answering that call), or, in the
per-request era, where a server sends log messages only for the requests that asked
for them, when exactly one call in flight asked at its level. A tied message is its
caller's alone (``ClientSide.logs``, at its level; a caller without ``logs`` takes
none); any other goes to every session's clients (the connection's sink, at
``asked``), as a handshake-era server's connection-wide messages do.
"""

from __future__ import annotations

from collections.abc import Iterable

from actors.connection.calls import InFlight, InFlightTable
from actors.connection.client_side import ClientSide
from actors.connection.server_log import SERVER_LOG_LEVELS, LogSink, admits
from actors.protocol.era import Era
from actors.protocol.messages import Untied
from actors.protocol.notifications import LogMessage

_RANK = {level: rank for rank, level in enumerate(SERVER_LOG_LEVELS)}


def most_verbose(levels: Iterable[str | None]) -> str | None:
    """The least severe of ``levels`` (None when there is none)."""
    known = [level for level in levels if level is not None]
    return min(known, key=_RANK.__getitem__) if known else None


def _more_verbose(level: str, other: str | None) -> str:
    """The less severe of two levels (one per message of a flood: no allocation)."""
    return level if other is None or _RANK[level] <= _RANK[other] else other


class LogDemand:
    """Who wants which level (by a key of the caller's choosing), and the most verbose
    of them. Pure: no I/O; the one who tells the connections keeps it."""

    __slots__ = ("_levels", "level")

    def __init__(self) -> None:
        self._levels: dict[str, str] = {}
        self.level: str | None = None

    def want(self, who: str, level: str | None) -> bool:
        """``who`` wants ``level`` from now on (None: nothing, and is forgotten); True
        when the most verbose level changed."""
        if level is None:
            self._levels.pop(who, None)
        else:
            if level not in _RANK:
                raise ValueError(f"unknown log level {level!r}; one of {', '.join(SERVER_LOG_LEVELS)}")
            self._levels[who] = level
        before, self.level = self.level, most_verbose(self._levels.values())
        return self.level != before


class LogLevels:
    """One connection actor's levels: ``own`` (the server's ``log_level``) and
    ``wanted`` (its sessions' clients'); see the module docstring."""

    __slots__ = ("_asked", "_own", "_wanted")

    def __init__(self, own: str = "warning", wanted: str | None = None) -> None:
        self._own, self._wanted = own, wanted
        self._asked = _more_verbose(own, wanted)

    @property
    def own(self) -> str:
        return self._own

    @own.setter
    def own(self, level: str) -> None:
        self._own, self._asked = level, _more_verbose(level, self._wanted)

    @property
    def wanted(self) -> str | None:
        return self._wanted

    @wanted.setter
    def wanted(self, level: str | None) -> None:
        self._wanted, self._asked = level, _more_verbose(self._own, level)

    def asked(self) -> str:
        """What the server is asked for connection-wide (handshake era)."""
        return self._asked

    def for_call(self, client: ClientSide | None) -> str:
        """What one call's ``_meta`` asks for (per-request era)."""
        return _more_verbose(self.own, client.log_level if client is not None else None)

    def route(
        self, message: LogMessage, inflight: InFlightTable, era: Era | None
    ) -> tuple[str | None, LogSink | None]:
        """Who reads ``message`` besides our log: (their level, their sink), the sink
        None for the connection's own (every session's clients)."""
        if message.related is None and era is not Era.PER_REQUEST:  # the cheap case of a flood
            return self._asked, None
        tied = _tied(message, inflight, era, self)
        if tied is None:
            return self.asked(), None
        caller = tied.call.client
        if caller is None or caller.logs is None:
            return None, None  # a caller that takes none: our log only
        return caller.log_level, caller.logs


def _tied(
    message: LogMessage, inflight: InFlightTable, era: Era | None, levels: LogLevels
) -> InFlight | None:
    """The call ``message`` is tied to, if it is tied to one."""
    related = message.related
    if isinstance(related, Untied):
        return None
    if related is not None:
        return inflight.get(related)
    if era is not Era.PER_REQUEST:
        return None
    asked = [e for e in inflight if admits(levels.for_call(e.call.client), message.level)]
    return asked[0] if len(asked) == 1 else None
