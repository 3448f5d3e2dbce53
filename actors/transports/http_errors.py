"""Everything httpx raises, as the transport error tree's errors, for ``http_link.py``.

Texts name the server and the step, never a header value, a session id or a URL's query
string, and pass the spec's redactor as a last guard. :class:`Mapped` is a plain context
manager: a generator-based one cost microseconds on every request, and on every read
of a stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx2

from actors.protocol.sse import SSEError
from actors.tls import hang_up_hint, tls_refusal
from actors.transport_errors import TransportClosed, TransportError

if TYPE_CHECKING:
    from actors.transports.http_link import RemoteLink


class Unreachable(TransportClosed):
    """Nothing accepts connections at the server's address: refused, unknown host, no
    route. Met while resuming a stream that was just open, it means the server is gone."""


class Mapped:
    """``RemoteLink.mapped(doing)``: httpx's errors within the block raised as ours."""

    __slots__ = ("_doing", "_link")

    def __init__(self, link: RemoteLink, doing: str) -> None:
        self._link = link
        self._doing = doing

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc is not None:
            ours = map_error(self._link, exc, self._doing)
            if ours is not None:
                raise ours from exc


def map_error(link: RemoteLink, exc: BaseException, doing: str) -> TransportError | None:
    """The error of ours an exception from httpx becomes (None: not httpx's)."""
    if isinstance(exc, httpx2.HTTPError):
        return _network_error(link, exc, doing)
    if isinstance(exc, httpx2.InvalidURL):
        return TransportError(f"mcp server {link.name}: unusable URL for {doing}: {exc}")
    if isinstance(exc, UnicodeError):  # a header value httpx cannot encode; never quote it
        return TransportError(f"mcp server {link.name}: a header of {doing} is not ASCII")
    if isinstance(exc, SSEError):
        return TransportError(f"mcp server {link.name}: {exc} during {doing}")
    return None


def _network_error(link: RemoteLink, exc: httpx2.HTTPError, doing: str) -> TransportError:
    name = link.name
    refusal = tls_refusal(exc)
    if refusal is not None and refusal.ours:
        return refusal.refused_ours(name)
    if refusal is not None:
        return Unreachable(f"mcp server {name}: cannot connect to {link.safe_url}: {refusal.text}")
    reason = link.redactor.redact(str(exc) or type(exc).__name__)
    # A hang-up once connected; a refused or unresolvable connection is no TLS matter.
    hung_up = isinstance(exc, httpx2.ReadError | httpx2.WriteError | httpx2.RemoteProtocolError)
    hung_up = hung_up and not link.answered
    if hung_up and link.url.lower().startswith("https:"):
        reason += f" ({hang_up_hint(link.spec.tls)})"
    if isinstance(exc, httpx2.TimeoutException):
        return TransportClosed(f"mcp server {name} did not answer {doing} in time ({type(exc).__name__})")
    if isinstance(exc, httpx2.ConnectError):
        return Unreachable(f"mcp server {name}: cannot connect to {link.safe_url}: {reason}")
    if isinstance(exc, httpx2.NetworkError | httpx2.RemoteProtocolError):
        return TransportClosed(f"mcp server {name}: the connection dropped during {doing}: {reason}")
    return TransportError(f"mcp server {name}: HTTP failure during {doing}: {reason}")
