"""The server side of one MCP session, without I/O: the counterpart of ``ClientSession``.

Feed it each message the client sends, as its decoded JSON object (``receive``); it
says what the message is (an event of ``server_events.py``, or None: nothing to do)
and keeps the session's state. Turning bytes into objects and messages into bytes
stays the front's work, as the framing is the transport's on the client side.

- The handshake: ``initialize`` first (the client's version when we serve it, else our
  newest); any other request before it is answered is refused (-32600), but ``ping``,
  which the session answers itself, as ``ClientSession`` does.
- The client's requests in flight, each a ``RequestReceived`` until the application
  answers it (``respond``, ``fail``; ``end`` for work that stopped without an answer).
  ``notifications/cancelled`` naming one marks it cancelled (``CancelRequested``): its
  answer is never sent, as the spec asks of a receiver. A cancel of anything else
  (answered, unknown, ``initialize``, which a client never cancels) is ignored.
- Our requests to the client (sampling, elicitation, roots), numbered ``s-1``, ``s-2``,
  … (strings, so they never collide with the client's own numbering); its answer comes
  back as ``ClientAnswered`` with the tag given to ``send_request``. ``close`` fails
  those still waiting.
- ``wire_error``: the one place where an exception becomes a JSON-RPC error.

The per-request era (2026-07-28) has no session: every request is an exchange of its
own, so the application opens one ``ServerSession(era=Era.PER_REQUEST)`` per message.
No handshake there: each request carries the era's ``_meta`` (``check_meta``), and the
methods the era removed are refused (-32601).

A request is any object with a string ``method`` and an ``id``, whatever the id's JSON
type or the params' shape, and ``jsonrpc`` is not looked at: the stdio front always
answered such requests, and a front that wants the envelope strict checks it first.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Mapping
from typing import Any

from actors.protocol.era import Era
from actors.protocol.errors import FramingError, JsonRpcError, ProtocolError
from actors.protocol.messages import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    MODERN_PROTOCOL_VERSIONS,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorObject,
    ErrorResponse,
    Notification,
    Request,
    RequestId,
    Response,
)
from actors.protocol.server_events import CancelRequested as CancelRequested
from actors.protocol.server_events import ClientAnswered as ClientAnswered
from actors.protocol.server_events import InitializeReceived as InitializeReceived
from actors.protocol.server_events import Replied as Replied
from actors.protocol.server_events import RequestReceived as RequestReceived
from actors.protocol.server_events import ServerEvent as ServerEvent

SERVED_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")
"""The handshake-era revisions we serve, newest first (2024-11-05 is answered with
the newest: no client of ours needs it served)."""
REMOVED_METHODS = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
"""Methods the per-request era removed (-32601)."""
UNEXPECTED = "the request failed in the server; see its log"
"""What the client reads of an exception that is none of ours (``wire_error``)."""


class ServerPhase(enum.Enum):
    """Where the handshake stands (the per-request era is READY from the start)."""

    NEW = "new"
    INITIALIZING = "initializing"  # initialize received, not answered yet
    READY = "ready"


class ServerSession:
    """One server-side MCP session (see the module docstring)."""

    def __init__(self, *, era: Era = Era.HANDSHAKE, versions: tuple[str, ...] = SERVED_VERSIONS) -> None:
        self.era = era
        self.versions = versions
        self.phase = ServerPhase.READY if era is Era.PER_REQUEST else ServerPhase.NEW
        self.version: str | None = None
        """The revision negotiated by ``initialize``, once it was answered."""
        self.client_info: Mapping[str, Any] | None = None
        self.client_capabilities: Mapping[str, Any] = {}
        self.closed: str | None = None
        """Why the client can answer nothing more (``close``); None while it can."""
        self._in_flight: dict[str, RequestReceived] = {}  # by repr(id): 1 and "1" stay apart
        self._asked: dict[RequestId, tuple[str, Any]] = {}  # our request id → (method, tag)
        self._numbers = itertools.count(1)

    @property
    def in_flight(self) -> int:
        """The client's requests being answered."""
        return len(self._in_flight)

    @property
    def waiting(self) -> int:
        """Our requests awaiting the client's answer."""
        return len(self._asked)

    # -------------------------------------------------------------------- incoming

    def receive(self, message: Mapping[str, Any], tag: Any = None) -> ServerEvent | None:
        """What one client message is; ``tag`` becomes a request's (see
        ``RequestReceived``). None: a notification, a stray answer, nothing to do."""
        method = message.get("method")
        if not isinstance(method, str):
            if "id" in message and ("result" in message or "error" in message):
                return self._answered(message)
            return None
        if "id" not in message:
            return self._notified(method, message.get("params"))
        request_id, params = message["id"], message.get("params")
        if self.era is Era.PER_REQUEST:
            return self._per_request(request_id, method, params, tag)
        if method == "ping":
            return Replied(Response(request_id, {}))
        if method == "initialize":
            return self._initialize(request_id, params, tag)
        if self.phase is not ServerPhase.READY:
            why = f"{method} before initialize: send initialize first"
            return Replied(error_response(request_id, JsonRpcError(INVALID_REQUEST, why)))
        return self._track(RequestReceived(request_id, method, params, progress_token(params), tag=tag))

    def _track(self, request: RequestReceived) -> RequestReceived:
        self._in_flight[repr(request.id)] = request
        return request

    def _initialize(self, request_id: Any, params: Any, tag: Any) -> ServerEvent:
        if not isinstance(params, Mapping) or not isinstance(params.get("protocolVersion"), str):
            why = "initialize: params.protocolVersion must be a string"
            return Replied(error_response(request_id, JsonRpcError(INVALID_PARAMS, why)))
        if self.phase is not ServerPhase.NEW:
            why = "initialize: this session is initialized already"
            return Replied(error_response(request_id, JsonRpcError(INVALID_REQUEST, why)))
        asked = params["protocolVersion"]
        capabilities, info = params.get("capabilities"), params.get("clientInfo")
        self.client_capabilities = capabilities if isinstance(capabilities, Mapping) else {}
        self.client_info = info if isinstance(info, Mapping) else None
        self.phase = ServerPhase.INITIALIZING
        version = asked if asked in self.versions else self.versions[0]
        request = RequestReceived(request_id, "initialize", params, progress_token(params), tag=tag)
        return InitializeReceived(request, version, self.client_info, self.client_capabilities)

    def _per_request(self, request_id: Any, method: str, params: Any, tag: Any) -> ServerEvent:
        try:
            checked = check_meta(method, params)
            if method in REMOVED_METHODS:
                see = "" if method == "initialize" else " (see subscriptions/listen and _meta)"
                why = f"method not found: {method} is not part of protocol {MODERN_PROTOCOL_VERSIONS[-1]}"
                raise JsonRpcError(METHOD_NOT_FOUND, why + see)
        except JsonRpcError as error:
            return Replied(error_response(request_id, error))
        meta = checked["_meta"]
        capabilities = meta[META_CLIENT_CAPABILITIES]
        return self._track(
            RequestReceived(request_id, method, checked, meta.get("progressToken"), capabilities, tag=tag)
        )

    def _notified(self, method: str, params: Any) -> CancelRequested | None:
        if method != "notifications/cancelled" or not isinstance(params, Mapping):
            return None
        if "requestId" not in params:
            return None
        request = self._in_flight.get(repr(params["requestId"]))
        if request is None:
            return None  # answered already, never sent, or initialize: nothing to cancel
        request.cancelled = True
        reason = params.get("reason")
        return CancelRequested(request, reason if isinstance(reason, str) else None)

    def _answered(self, message: Mapping[str, Any]) -> ClientAnswered | None:
        request_id = message.get("id")
        asked = self._asked.pop(request_id, None) if isinstance(request_id, str) else None
        if request_id is None or asked is None:
            return None  # not one of ours, or answered twice: the first answer stands
        method, tag = asked
        error = message.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, Mapping) else None
            text = error.get("message") if isinstance(error, Mapping) else None
            data = error.get("data") if isinstance(error, Mapping) else None
            refused = ErrorObject(
                code if isinstance(code, int) else INTERNAL_ERROR,
                text if isinstance(text, str) else f"the client refused {method}",
                data,
            )
            return ClientAnswered(request_id, method, tag, error=refused)
        result = message.get("result")
        if not isinstance(result, Mapping):
            hollow = ErrorObject(INTERNAL_ERROR, f"the client's answer to {method} has no result object")
            return ClientAnswered(request_id, method, tag, error=hollow)
        return ClientAnswered(request_id, method, tag, result=result)

    # -------------------------------------------------------------------- answers

    def accept_initialize(
        self,
        event: InitializeReceived,
        *,
        capabilities: Mapping[str, Any],
        server_info: Mapping[str, Any],
        instructions: str | None = None,
    ) -> Response:
        """Answer ``initialize`` with what we serve: the session is READY."""
        if self.phase is not ServerPhase.INITIALIZING:
            raise RuntimeError(f"no initialize to accept (phase {self.phase.value})")
        self.version = event.version
        self.phase = ServerPhase.READY
        result: dict[str, Any] = {
            "protocolVersion": event.version,
            "capabilities": capabilities,
            "serverInfo": server_info,
        }
        if instructions:
            result["instructions"] = instructions
        return Response(event.request.id, result)

    def resume(
        self, version: str, client_info: Mapping[str, Any] | None, capabilities: Mapping[str, Any]
    ) -> None:
        """Take up a session another server process negotiated (a replica's takeover):
        READY at ``version`` with what the client said at its ``initialize`` there."""
        if self.phase is not ServerPhase.NEW or version not in self.versions:
            raise RuntimeError(f"cannot resume a session at {version!r} from phase {self.phase.value}")
        self.version, self.client_info = version, client_info
        self.client_capabilities = capabilities
        self.phase = ServerPhase.READY

    def respond(self, request: RequestReceived, result: Mapping[str, Any]) -> Response | None:
        """The response to send for ``request``; None when the client cancelled it."""
        self.end(request)
        return None if request.cancelled else Response(request.id, result)

    def fail(
        self,
        request: RequestReceived | InitializeReceived,
        exc: BaseException,
        *,
        unexpected: str = UNEXPECTED,
    ) -> ErrorResponse | None:
        """The error response to send for ``request`` (``wire_error``); None when the
        client cancelled it. A failed ``initialize`` may be sent again."""
        if isinstance(request, InitializeReceived):
            if self.phase is ServerPhase.INITIALIZING:
                self.phase = ServerPhase.NEW
            request = request.request
        self.end(request)
        return None if request.cancelled else ErrorResponse(request.id, wire_error(exc, unexpected))

    def end(self, request: RequestReceived) -> None:
        """Stop tracking ``request`` (answered, or its work stopped without an answer)."""
        key = repr(request.id)
        if self._in_flight.get(key) is request:  # a newer request may reuse the id
            del self._in_flight[key]

    # -------------------------------------------------------------------- outgoing

    def send_request(self, method: str, params: Any = None, *, tag: Any = None) -> Request:
        """Our request to the client, to send; its answer comes back as a
        ``ClientAnswered`` carrying ``tag``. JsonRpcError (-32603) once ``close``d."""
        if self.era is Era.PER_REQUEST:
            raise RuntimeError("the per-request era sends its clients no requests (input_required instead)")
        if self.closed is not None:
            raise JsonRpcError(INTERNAL_ERROR, self.closed)
        request_id = f"s-{next(self._numbers)}"
        self._asked[request_id] = (method, tag)
        return Request(request_id, method, params)

    def forget(self, request_id: RequestId) -> None:
        """Stop waiting for the answer to one of our requests (a late one is dropped)."""
        self._asked.pop(request_id, None)

    def close(self, reason: str) -> list[ClientAnswered]:
        """The client is gone: our requests still waiting fail with ``reason`` (their
        ``ClientAnswered``, to hand to whoever waits), and no more can be sent."""
        self.closed = reason
        failed = [
            ClientAnswered(request_id, method, tag, error=ErrorObject(INTERNAL_ERROR, reason))
            for request_id, (method, tag) in self._asked.items()
        ]
        self._asked.clear()
        return failed


# ------------------------------------------------------------------ wire errors


def wire_error(exc: BaseException, unexpected: str = UNEXPECTED) -> ErrorObject:
    """The JSON-RPC error a client gets for ``exc``: a ``JsonRpcError`` as it says, a
    message we could not read as a parse error (-32700) or an invalid request (-32600),
    and anything else as -32603 with ``unexpected`` (never the exception's own text)."""
    if isinstance(exc, JsonRpcError):
        return ErrorObject(exc.code, exc.message, exc.data)
    if isinstance(exc, FramingError):
        return ErrorObject(PARSE_ERROR, str(exc))
    if isinstance(exc, ProtocolError):
        return ErrorObject(INVALID_REQUEST, str(exc))
    return ErrorObject(INTERNAL_ERROR, unexpected)


def error_response(request_id: Any, exc: BaseException, unexpected: str = UNEXPECTED) -> ErrorResponse:
    """An error response for ``request_id`` (None: a message whose id we could not
    read), with ``wire_error``'s error."""
    return ErrorResponse(request_id, wire_error(exc, unexpected))


# --------------------------------------------------------------------- the eras


def progress_token(params: Any) -> Any:
    """``params._meta.progressToken``, or None."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return meta.get("progressToken") if isinstance(meta, Mapping) else None


def progress_notification(
    token: Any, progress: float, total: float | None = None, message: str | None = None
) -> Notification:
    """``notifications/progress`` for the request whose progress token is ``token``."""
    params: dict[str, Any] = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = total
    if message is not None:
        params["message"] = message
    return Notification("notifications/progress", params)


def check_meta(method: str, params: Any) -> Mapping[str, Any]:
    """``params`` (``{}`` for none) with a valid ``_meta`` of the per-request era, else
    the spec's error: -32602 for a missing or malformed one (a log level is one of
    ``LOG_LEVELS``, or absent), -32022 for a version we do not speak."""
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise JsonRpcError(INVALID_PARAMS, f"{method}: params must be an object")
    meta = params.get("_meta")
    if not isinstance(meta, Mapping):
        raise JsonRpcError(
            INVALID_PARAMS,
            f"{method}: params._meta is missing; a 2026-07-28 request carries {META_PROTOCOL_VERSION} "
            f"and {META_CLIENT_CAPABILITIES} in it",
        )
    missing = [key for key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if key not in meta]
    if missing:
        raise JsonRpcError(INVALID_PARAMS, f"{method}: params._meta lacks {', '.join(missing)}")
    if not isinstance(meta[META_CLIENT_CAPABILITIES], Mapping):
        raise JsonRpcError(INVALID_PARAMS, f"{method}: _meta {META_CLIENT_CAPABILITIES} must be an object")
    if meta.get(META_LOG_LEVEL, "debug") not in LOG_LEVELS:
        why = f"{method}: _meta {META_LOG_LEVEL} must be one of {', '.join(LOG_LEVELS)} (or absent: no logs)"
        raise JsonRpcError(INVALID_PARAMS, why)
    version = meta[META_PROTOCOL_VERSION]
    if version not in MODERN_PROTOCOL_VERSIONS:
        raise unsupported_version(version)
    return params


def unsupported_version(version: Any) -> JsonRpcError:
    """-32022 for a version the per-request era does not speak, naming those it does."""
    return JsonRpcError(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"unsupported protocol version {version!r}: this gateway speaks "
        f"{', '.join(MODERN_PROTOCOL_VERSIONS)} without a session "
        "(and 2025-11-25 and earlier through initialize)",
        {"supported": list(MODERN_PROTOCOL_VERSIONS), "requested": version},
    )
