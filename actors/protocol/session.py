"""The client side of one MCP session, without I/O (h2-style).

Feed it the server's messages with ``receive_messages``; take events with
``next_event``; every message it wants sent is queued and taken with
``messages_to_send``. Messages are the frozen classes of ``messages.py``: turning
them into bytes and back is the framing's work, done by the transport (``ndjson.py``
for stdio, ``http_framing.py`` for HTTP), once. The session correlates responses
with the requests it sent, negotiates the protocol version, answers ``ping`` by
itself, and turns server notifications into typed events.

Phases: ``NEW`` → (initialize sent) ``INITIALIZING`` → (answer accepted,
``notifications/initialized`` queued) ``READY``; ``CLOSED`` after a protocol error.
Requests other than ``initialize`` and ``ping`` are refused before ``READY``.

The per-request era (2026-07-28, ``era.py``) starts differently: ``NEW`` →
(``server/discover`` sent) ``DISCOVERING`` → a ``DiscoverAnswered`` event; then either
``adopt`` (``READY``, and from then on every request carries the era's ``_meta``) or
``fall_back`` (``NEW`` again, ready for ``initialize``). A probe that timed out is
still awaited: a server slow to start (or a machine too busy to read its answer in
time) may answer it after all, and then refuses the ``initialize`` that followed
(-32022, as the SDK's dual-era loop does once a connection is locked to the new era;
a server of the new era only may refuse it otherwise, or answer it with nonsense). If
``initialize`` fails, that late answer, once it came, settles the era: the session
adopts it itself (an ``Adopted`` event instead of ``Initialized``); if ``initialize``
succeeds, it does. A server that answers ``initialize`` itself with a version
of the per-request era (as the conformance suite's mock servers of 2026-07-28 do) is
spoken to in that era from then on: ``_meta`` on every request, no
``notifications/initialized``.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from actors.protocol.era import (
    Era,
    ProbeOutcome,
    known_version,
    mutual_version,
    request_meta,
    restamp,
    supported_retry,
)
from actors.protocol.errors import ProtocolError, VersionMismatch
from actors.protocol.messages import (
    LATEST_MODERN_VERSION,
    LATEST_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    MODERN_PROTOCOL_VERSIONS,
    SUPPORTED_PROTOCOL_VERSIONS,
    Caps,
    DiscoverResult,
    ErrorObject,
    ErrorResponse,
    InitializeResult,
    Message,
    Notification,
    Params,
    Request,
    RequestId,
    Response,
)
from actors.protocol.notifications import Cancelled as Cancelled
from actors.protocol.notifications import ListenAcknowledged as ListenAcknowledged
from actors.protocol.notifications import LogMessage as LogMessage
from actors.protocol.notifications import ProgressReceived as ProgressReceived
from actors.protocol.notifications import PromptsListChanged as PromptsListChanged
from actors.protocol.notifications import ResourceChanged as ResourceChanged
from actors.protocol.notifications import ResourcesListChanged as ResourcesListChanged
from actors.protocol.notifications import ServerNotification as ServerNotification
from actors.protocol.notifications import ToolsListChanged as ToolsListChanged
from actors.protocol.notifications import notification_event
from actors.protocol.payloads import structure_discover_result, structure_initialize_result
from actors.protocol.session_events import Adopted as Adopted
from actors.protocol.session_events import DiscoverAnswered as DiscoverAnswered
from actors.protocol.session_events import ErrorReceived as ErrorReceived
from actors.protocol.session_events import Event as Event
from actors.protocol.session_events import Initialized as Initialized
from actors.protocol.session_events import ResponseReceived as ResponseReceived
from actors.protocol.session_events import ServerRequest as ServerRequest
from actors.protocol.session_events import StrayResponse as StrayResponse


class Phase(enum.Enum):
    """Where the handshake stands."""

    NEW = "new"
    DISCOVERING = "discovering"
    INITIALIZING = "initializing"
    READY = "ready"
    CLOSED = "closed"


# ------------------------------------------------------------------------ session


class ClientSession:
    """One client-side MCP session: correlation, handshake, ping, typed events."""

    def __init__(
        self,
        *,
        client_info: Mapping[str, Any] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        protocol_version: str = LATEST_PROTOCOL_VERSION,
    ) -> None:
        self.client_info = dict(client_info or {"name": "trio-mcp-supervisor", "version": "0.1.0"})
        self.capabilities = dict(capabilities or {})
        self.offered_version = protocol_version
        self.phase = Phase.NEW
        self.negotiated: InitializeResult | None = None
        self.discovered: DiscoverResult | None = None
        self.version: str | None = None  # the revision spoken, once READY (set by _speak)
        self.era: Era | None = None  # its era, set with it: read on every answer, so not derived each time
        self._meta: dict[str, Any] | None = None  # per-request era: every request's _meta
        self._reprobed = False  # server/discover was sent again at a version the server named
        self._late_probe: RequestId | None = None  # a probe we fell back from, unanswered
        self._late: Response | ErrorResponse | None = None  # its answer, before initialize's
        self._held: ProtocolError | None = None  # initialize's failure, until the late answer
        self._outbox: list[Message] = []
        self._events: deque[Event] = deque()
        self._pending: dict[RequestId, str] = {}
        self._next_id = 0

    # --------------------------------------------------------------- outgoing

    def messages_to_send(self) -> list[Message]:
        """Every message queued for the server, in order; empties the queue."""
        outbox = self._outbox
        if outbox:
            self._outbox = []
        else:
            outbox = []  # never hand out the queue itself
        return outbox

    @property
    def wants_to_send(self) -> bool:
        """Is something queued for the server?"""
        return bool(self._outbox)

    def start_initialize(self, meta: Mapping[str, str] | None = None) -> RequestId:
        """Queue ``initialize`` (``meta``: a trace's context, into its ``_meta``); the
        answer arrives as an ``Initialized`` event."""
        if self.phase is not Phase.NEW:
            raise RuntimeError(f"initialize already sent (phase {self.phase.value})")
        self.phase = Phase.INITIALIZING
        params = {
            "protocolVersion": self.offered_version,
            "capabilities": self.capabilities,
            "clientInfo": self.client_info,
        }
        return self._queue_request("initialize", params, meta=meta)

    def start_discover(
        self, version: str = LATEST_MODERN_VERSION, meta: Mapping[str, str] | None = None
    ) -> RequestId:
        """Queue ``server/discover`` (the per-request era's probe), itself carrying the
        era's ``_meta``; its end arrives as a ``DiscoverAnswered`` event (a -32022 naming
        a version we speak is probed again at it, once, as the SDK does)."""
        if self.phase is not Phase.NEW:
            raise RuntimeError(f"cannot probe server/discover in phase {self.phase.value}")
        self.phase = Phase.DISCOVERING
        era_meta = request_meta(self.client_info, self.capabilities, version)
        return self._queue_request("server/discover", {"_meta": era_meta}, meta=meta)

    def adopt(self, result: DiscoverResult) -> None:
        """Speak the per-request era: every request from now on carries its ``_meta``."""
        version = mutual_version(result)
        if self.phase is not Phase.DISCOVERING or version is None:
            raise RuntimeError(f"cannot adopt {result.supported_versions} in phase {self.phase.value}")
        self.discovered = result
        self._speak(version)
        self._meta = request_meta(self.client_info, self.capabilities, version)
        self.phase = Phase.READY

    def fall_back(self) -> None:
        """The server is of the handshake era, as far as we know: ready for
        ``initialize``. A probe still unanswered (it timed out) stays awaited: should
        ``initialize`` fail, its late answer may still settle the era (once it succeeds,
        that answer becomes a StrayResponse)."""
        if self.phase is not Phase.DISCOVERING:
            raise RuntimeError(f"nothing to fall back from in phase {self.phase.value}")
        for request_id, method in self._pending.items():
            if method == "server/discover":
                self._late_probe = request_id
        self.phase = Phase.NEW

    @property
    def capabilities_of_server(self) -> Mapping[str, Any]:
        """What the server declared (``initialize`` or ``server/discover``); empty before."""
        settled = self.negotiated or self.discovered
        return settled.capabilities if settled is not None else {}

    def _speak(self, version: str) -> None:
        """Settle the revision spoken, and the era it belongs to with it."""
        self.version = version
        self.era = Era.of_version(version)

    def send_request(
        self,
        method: str,
        params: Params = None,
        *,
        progress: bool = False,
        capabilities: Caps = None,
        log_level: str | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> RequestId:
        """Queue a request; its answer arrives as ResponseReceived or ErrorReceived.

        With ``progress``, the request id doubles as ``_meta.progressToken`` so progress
        notifications can be matched to the request without another table. In the
        per-request era, ``capabilities`` (the calling session's) replace the session's own,
        and ``log_level`` asks for the request's log messages at that level and above.
        ``meta`` (a traced request's context, ``actors/tracing.py``) joins its ``_meta``.
        """
        if self.phase is not Phase.READY and method != "ping":
            raise RuntimeError(f"cannot send {method} before the handshake completed")
        return self._queue_request(
            method, params, progress=progress, capabilities=capabilities, log_level=log_level, meta=meta
        )

    def send_notification(self, method: str, params: Params = None) -> None:
        """Queue a notification."""
        self._outbox.append(Notification(method, params))

    def send_cancelled(self, request_id: RequestId, reason: str) -> None:
        """Tell the server we gave up on a request, and stop waiting for its answer."""
        self._pending.pop(request_id, None)
        self.send_notification("notifications/cancelled", {"requestId": request_id, "reason": reason})

    def forget(self, request_id: RequestId) -> None:
        """Stop correlating a request (a late answer becomes a StrayResponse)."""
        self._pending.pop(request_id, None)

    def send_response(self, request_id: RequestId, result: Mapping[str, Any]) -> None:
        """Answer a ServerRequest."""
        self._outbox.append(Response(request_id, result))

    def send_error(self, request_id: RequestId, code: int, message: str) -> None:
        """Answer a ServerRequest with an error."""
        self._outbox.append(ErrorResponse(request_id, ErrorObject(code, message)))

    def _queue_request(
        self,
        method: str,
        params: Params,
        *,
        progress: bool = False,
        capabilities: Caps = None,
        log_level: str | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> RequestId:
        request_id = self._next_id
        self._next_id += 1
        stamp = restamp(self._meta, capabilities, log_level)
        if (progress or stamp or meta) and not isinstance(params, list):
            base: Mapping[str, Any] = params or {}
            joined = {**(base.get("_meta") or {}), **(stamp or {}), **(meta or {})}
            if progress:
                joined["progressToken"] = request_id
            params = {**base, "_meta": joined}
        self._outbox.append(Request(request_id, method, params))
        self._pending[request_id] = method
        return request_id

    @property
    def pending_requests(self) -> int:
        """How many of our requests await an answer."""
        return len(self._pending)

    # --------------------------------------------------------------- incoming

    def receive_messages(self, messages: Iterable[Message]) -> None:
        """Take messages from the server, in order. A ProtocolError closes the session
        (the messages before the one that raised were handled)."""
        if self.phase is Phase.CLOSED:
            raise ProtocolError("session is closed")
        try:
            for message in messages:
                self._handle(message)
        except ProtocolError:
            self.phase = Phase.CLOSED
            raise

    def receive_message(self, message: Message) -> None:
        """Take one message from the server (``receive_messages`` of one)."""
        self.receive_messages((message,))

    def next_event(self) -> Event | None:
        """The next event, or None when there is none."""
        return self._events.popleft() if self._events else None

    def _handle(self, message: Message) -> None:
        if isinstance(message, Response | ErrorResponse):
            self._handle_response(message)
        elif isinstance(message, Request):
            if message.method == "ping":
                self.send_response(message.id, {})
            else:
                self._events.append(
                    ServerRequest(message.id, message.method, message.params, message.related)
                )
        else:
            self._handle_notification(message)

    def _handle_response(self, message: Response | ErrorResponse) -> None:
        request_id = message.id
        method = self._pending.pop(request_id, None) if request_id is not None else None
        if method is None or request_id is None:
            if isinstance(message, ErrorResponse) and message.id is None:
                # The server could not parse something we sent: that is its report of
                # our bug or of corruption on the pipe, and the session cannot continue.
                raise ProtocolError(f"server reported an unreadable request: {message.error.message}")
            self._events.append(StrayResponse(message.id))
            return
        if method == "initialize":
            self._finish_initialize(message)
        elif method == "server/discover" and request_id == self._late_probe:
            self._late_probe_answered(message)
        elif method == "server/discover" and self.phase is Phase.DISCOVERING:
            self._finish_discover(message)  # the probe; asked again once READY, an answer like any
        elif isinstance(message, Response):
            self._events.append(ResponseReceived(request_id, method, message.result))
        else:
            self._events.append(ErrorReceived(request_id, method, message.error))

    def _finish_initialize(self, message: Response | ErrorResponse) -> None:
        try:
            result = _accepted(message)
        except ProtocolError as failure:
            self._initialize_failed(failure)
            return
        if self._late_probe is not None:  # settled: its late answer would be a stray one
            self._pending.pop(self._late_probe, None)
            self._late_probe = self._late = None
        version = result.protocol_version
        self.negotiated = result
        self._speak(version)
        self.phase = Phase.READY
        if self.era is Era.PER_REQUEST:  # a server of the new era that answers initialize too
            self._meta = request_meta(self.client_info, self.capabilities, version)
        else:  # the per-request era has no notifications from the client
            self.send_notification("notifications/initialized")
        self._events.append(Initialized(result))

    def _finish_discover(self, message: Response | ErrorResponse) -> None:
        if isinstance(message, ErrorResponse):
            error = message.error
            retry = supported_retry(error) if not self._reprobed else None
            if retry is not None:
                self._reprobed = True
                self.phase = Phase.NEW
                self.start_discover(retry)
                return
            detail = f"{error.message} (code {error.code})"
            self._events.append(DiscoverAnswered(ProbeOutcome.REFUSED, detail=detail))
            return
        try:
            result = structure_discover_result(message.result)
        except ProtocolError as exc:  # not evidence of the new era: a handshake-era server
            self._events.append(DiscoverAnswered(ProbeOutcome.NO_MUTUAL_VERSION, detail=str(exc)))
            return
        if mutual_version(result) is None:
            named = ", ".join(result.supported_versions) or "none"
            detail = f"supported versions: {named}"
            self._events.append(DiscoverAnswered(ProbeOutcome.NO_MUTUAL_VERSION, result, detail))
            return
        self._events.append(DiscoverAnswered(ProbeOutcome.PER_REQUEST, result))

    def _initialize_failed(self, failure: ProtocolError) -> None:
        """``initialize`` was refused, or its answer is unusable. After a probe that
        went unanswered (it timed out), that probe's late answer settles the era (a
        server slow to start, or a busy machine): at once if it came, else when it
        comes. Else the failure stands."""
        if self._late is not None:
            self._adopt_late(self._late, failure)
        elif self._late_probe is not None:
            self._held = failure
            self.phase = Phase.DISCOVERING
        else:
            raise failure

    def _late_probe_answered(self, message: Response | ErrorResponse) -> None:
        """The probe we fell back from answered after all: it settles the era if
        ``initialize`` failed; until ``initialize`` is answered, it is kept."""
        self._late_probe = None
        if self._held is None:
            self._late = message
            return
        failure, self._held = self._held, None
        self._adopt_late(message, failure)

    def _adopt_late(self, message: Response | ErrorResponse, failure: ProtocolError) -> None:
        """Adopt the per-request era from a late ``server/discover`` answer, or let
        ``initialize``'s failure stand."""
        result = _our_era(message)
        if result is None:
            raise failure
        self.phase = Phase.DISCOVERING
        self.adopt(result)
        self._events.append(Adopted(result))

    def _handle_notification(self, message: Notification) -> None:
        self._events.append(notification_event(message.method, message.params, message.related))


def _accepted(message: Response | ErrorResponse) -> InitializeResult:
    """An ``initialize`` answer's result, or the ProtocolError that says why not."""
    if isinstance(message, ErrorResponse):
        error = message.error
        raise ProtocolError(f"server refused initialize: {error.message} (code {error.code})")
    result = structure_initialize_result(message.result)
    if not known_version(result.protocol_version):
        raise VersionMismatch(
            f"server answered protocol version {result.protocol_version!r}; this client speaks "
            f"{', '.join((*SUPPORTED_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS))}"
        )
    return result


def _our_era(message: Response | ErrorResponse) -> DiscoverResult | None:
    """A ``server/discover`` answer that names a per-request version of ours, or None."""
    if not isinstance(message, Response):
        return None
    try:
        result = structure_discover_result(message.result)
    except ProtocolError:
        return None
    return result if mutual_version(result) is not None else None


def method_not_found(session: ClientSession, request: ServerRequest) -> None:
    """The default answer to a server request nobody registered a handler for."""
    session.send_error(request.id, METHOD_NOT_FOUND, f"client does not handle {request.method}")
