"""What a ``ServerSession`` (``server_session.py``, which re-exports these) makes of
one client message: a request for the application to answer, the handshake to
accept, an answer the session gave by itself, a cancel, or the client's answer to one
of our requests. Without I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs

from actors.protocol.messages import ErrorObject, ErrorResponse, RequestId, Response


@attrs.define(eq=False, slots=True)
class RequestReceived:
    """A client's request for the application to answer (``respond`` or ``fail``).

    An entity rather than a value: while it is answered the session holds it, and the
    client's ``notifications/cancelled`` marks it ``cancelled`` (its answer is then
    never sent). ``tag`` is the application's own handle on the work (a cancel scope),
    given to ``receive`` and handed back with the cancel."""

    id: Any
    """As the client sent it (a string or an integer; the stdio front is lenient)."""
    method: str
    params: Any
    progress_token: Any = None
    """``params._meta.progressToken``, echoed on each progress notification."""
    capabilities: Mapping[str, Any] | None = None
    """The per-request era: the client's capabilities from this request's ``_meta``."""
    tag: Any = None
    cancelled: bool = False


@attrs.frozen(slots=True)
class InitializeReceived:
    """``initialize``, valid and first: the application accepts it
    (``accept_initialize``, with what it serves) or fails it (``fail``)."""

    request: RequestReceived
    version: str
    """The revision the session will answer: the client's, else our newest."""
    client_info: Mapping[str, Any] | None
    capabilities: Mapping[str, Any]


@attrs.frozen(slots=True)
class Replied:
    """The session answered the request itself (``ping``; a request the handshake or
    the era refuses): ``message`` goes to the client as it is."""

    message: Response | ErrorResponse


@attrs.frozen(slots=True)
class CancelRequested:
    """The client cancelled ``request``, in flight: stop its work (no answer is sent)."""

    request: RequestReceived
    reason: str | None = None


@attrs.frozen(slots=True)
class ClientAnswered:
    """The client answered one of our requests (or never will: ``close``): ``result``,
    or ``error``; ``tag`` as given to ``send_request``."""

    request_id: RequestId
    method: str
    tag: Any
    result: Mapping[str, Any] | None = None
    error: ErrorObject | None = None


ServerEvent: TypeAlias = RequestReceived | InitializeReceived | Replied | CancelRequested | ClientAnswered
