"""The transport error tree: how a connection to a server fails, whichever code noticed.

Low-level errors (OSError, trio's resource errors, a process exit, an HTTP status) are
mapped into this tree at the edge, by the transports, the OAuth client and the TLS
setup alike, and nowhere else:

    TransportError                 the connection is unusable; the actor goes to backoff
    ├── SpawnError                 a local server could not be started (command missing, cwd, exec)
    ├── TransportClosed            the peer went away (EOF, broken pipe, process exited)
    └── AuthRequired               the server refused our credentials (HTTP 401/403)

Messages are user-facing: they name the server and say what to do. Its own module,
below ``transports/`` and ``auth/``, so that both raise it without importing each other.
"""

from __future__ import annotations


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
