"""The transport contract and the transport error tree.

A transport moves JSON-RPC messages (the frozen classes of
``actors/protocol/messages.py``) between a connection actor and one MCP server. It
owns the framing: it turns the wire's frames into messages and back with a pure codec
(``actors/protocol/ndjson.py`` for stdio), decoding each frame once. A frame that does
not decode is the codec's ProtocolError, which ends the connection. Low-level errors
(OSError, trio's resource errors, a process exit) are mapped here, at the edge, into
this tree and nowhere else:

    TransportError                 the connection is unusable; the actor goes to backoff
    ├── SpawnError                 a local server could not be started (command missing, cwd, exec)
    ├── TransportClosed            the peer went away (EOF, broken pipe, process exited)
    └── AuthRequired               the server refused our credentials (HTTP 401/403)

Messages are user-facing: they name the server and say what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from actors.connection.spec import ServerSpec
from actors.protocol.messages import Message

USER_AGENT = "trio-mcp-supervisor"  # how we name ourselves to remote servers and OAuth servers


class TransportError(Exception):
    """The connection to a server can no longer be used."""


class SpawnError(TransportError):
    """A local server could not be started."""


class TransportClosed(TransportError):
    """The server closed the connection or its process exited."""


class AuthRequired(TransportError):
    """The server refused our credentials (HTTP 401/403). The text starts
    ``mcp server <name>: authentication failed`` and may add a ``detail`` for the
    operator (never a header value or token); ``status`` keeps the HTTP code. Calls in
    flight end ``auth_failed``. ``needs_login``: retrying will not help until someone
    authorizes again (``mcp-supervisor auth login``) — the ``needs_auth`` condition."""

    def __init__(self, server: str, status: int, *, detail: str = "", needs_login: bool = False) -> None:
        text = f"mcp server {server}: authentication failed"
        super().__init__(f"{text}: {detail}" if detail else text)
        self.status = status
        self.needs_login = needs_login


class Transport(Protocol):
    """Messages to and from one MCP server.

    ``send`` and ``receive`` may be called from different tasks, but each from one
    task at a time. ``receive`` returns ``[]`` at a clean end of stream.
    """

    async def send(self, messages: Sequence[Message]) -> None:
        """Send ``messages`` in order; raise TransportClosed if the peer is gone."""
        ...

    async def receive(self) -> Sequence[Message]:
        """Return the next messages (at least one), or ``[]`` at end of stream."""
        ...

    def stderr_tail(self) -> Sequence[str]:
        """The last lines the server wrote to stderr (redacted); empty for remote servers."""
        ...

    def describe(self) -> str:
        """One short line for logs: pid, URL, … (never secrets)."""
        ...


class Connector(Protocol):
    """Opens a transport for a server spec; leaving the context tears it down.

    Teardown must finish even when the surrounding scope is cancelled (it runs
    shielded, under its own deadline): no process or socket outlives the context.
    """

    def __call__(self, spec: ServerSpec) -> AbstractAsyncContextManager[Transport]: ...
