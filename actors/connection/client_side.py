"""The calling session's side of a connection: who answers a server's requests tied
to one call, and what that session declares it can do.

A shared connection serves many sessions. A server request tied to a call (SEP-2260:
sampling, elicitation or roots asked while the server handles that call) goes to the
calling session's handler; one that is not tied to a call, or whose session has no
handler for it, goes to the supervisor-level handler (``Supervisor.open(server_requests=…)``);
with neither, the server gets a JSON-RPC error that says none is attached. In the
per-request era the capabilities ride in each request's ``_meta``, so they are the
calling session's exactly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any

import attrs

from actors.connection.server_log import LogSink

ServerRequestHandler = Callable[[str, str, Any], Awaitable[Mapping[str, Any] | None]]
"""``(server, method, params) -> result``, or None when the host does not handle ``method``."""


INPUT_KEY: ContextVar[str | None] = ContextVar("input_key", default=None)
"""While a handler answers one input request of a per-request-era server's
"input required" result, the server's own key for it (``inputRequests.<key>``), so a
handler that relays it to a client of that era (the MCP gateway) can keep the key."""


class RequestRefused(Exception):
    """A handler's refusal of a server request, handed on as its JSON-RPC error (the
    MCP gateway raises it with what its own client answered)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@attrs.frozen(slots=True, eq=False)
class ClientSide:
    """One session's side of its calls: ``handler`` answers the server requests tied to
    them (None: the supervisor-level handler does), ``capabilities`` are what the
    session declares (the per-request era's ``_meta.clientCapabilities``).

    ``log_level``: the least severe server log message its client wants from these
    calls (None: none), which the per-request era's ``_meta`` asks for; ``logs`` takes
    each message tied to one of them that its level admits (it must not block: the
    connection actor's loop calls it). Without ``logs``, such a message goes where a
    message tied to no call goes (``log_levels.py``)."""

    session: str
    handler: ServerRequestHandler | None = None
    capabilities: Mapping[str, Any] = attrs.field(factory=dict)
    log_level: str | None = None
    logs: LogSink | None = None
