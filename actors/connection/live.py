"""One open connection: its reader, its calls and their deadlines, its write path.

A ``Live`` exists from ``authenticate`` until the connection attempt ends; its tasks
(the reader, a writer while something is queued, server requests, a ping after a
timeout, a relist) run in a nursery owned by that attempt. It reports what it sees to
the actor as state machine events (``ListChanged``, ``Failed``, ``CallTimedOut``,
``Alive``) and decides nothing about the connection's state itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import trio

from actors.connection import retry
from actors.connection.calls import InFlight, InFlightTable, call_params, describe, server_error
from actors.connection.client_side import ServerRequestHandler
from actors.connection.freshness import refetch_after
from actors.connection.listener import ChangeListener
from actors.connection.listing import ALL_KINDS, CHANGED_KIND, Kind
from actors.connection.log_levels import LogLevels
from actors.connection.messages import Answered, CallFailed, CallOutcome, CallSucceeded, CallTool, Redefined
from actors.connection.own_requests import traced_request
from actors.connection.retry import Draw
from actors.connection.rounds import RoundTrips
from actors.connection.server_log import LogSink, ServerLog
from actors.connection.server_requests import ServerRequests, answer_request, refuse
from actors.connection.vocabulary import LIST_CHANGED, CallTimedOut, Effects, Event, Failed
from actors.connection.writing import WritePath
from actors.log_events import get_logger
from actors.mailbox import answer, try_send
from actors.protocol.era import Era, Opening
from actors.protocol.errors import ProtocolError, Unencodable
from actors.protocol.listen import LISTEN
from actors.protocol.messages import ErrorObject, Request, RequestId, ServerFeatures, Tool
from actors.protocol.payloads import structure_call_result
from actors.protocol.rounds import input_required, retry_params
from actors.protocol.session import (
    Adopted,
    Cancelled,
    ClientSession,
    DiscoverAnswered,
    ErrorReceived,
    Initialized,
    ListenAcknowledged,
    LogMessage,
    ProgressReceived,
    PromptsListChanged,
    ResourceChanged,
    ResourcesListChanged,
    ResponseReceived,
    ServerRequest,
    ToolsListChanged,
)
from actors.redaction import Redactor
from actors.spec import ServerSpec
from actors.tool_definitions import Fingerprints
from actors.tracing import HOOK, NO_ATTEMPT
from actors.transport_errors import AuthRequired, TransportClosed, TransportError
from actors.transports.base import Transport

log = get_logger("actors.connection")

__all__ = ["Live", "ServerRequestHandler"]


class Live:
    """One connection while it is up (see the module docstring)."""

    __slots__ = (
        "_draw",
        "_inflight",
        "_internal",
        "_redactor",
        "_server_log",
        "_server_requests",
        "_stale_timer",
        "_updated",
        "attempt_span",
        "deadline_scope",
        "definitions",
        "features",
        "initialized",
        "levels",
        "listener",
        "name",
        "nursery",
        "pending",
        "probe_answer",
        "probe_closed",
        "probe_done",
        "probing",
        "report",
        "rounds",
        "session",
        "spec",
        "transport",
        "writes",
    )

    def __init__(
        self,
        spec: ServerSpec,
        transport: Transport,
        nursery: trio.Nursery,
        inflight: InFlightTable,
        report: Callable[[Event], Effects],
        *,
        capabilities: dict[str, Any],
        redactor: Redactor,
        server_requests: ServerRequestHandler | None,
        updated: Callable[[str], None] = lambda uri: None,
        log_sink: LogSink | None = None,
        levels: LogLevels | None = None,
        draw: Draw = retry.draw,
    ) -> None:
        self.name = spec.name
        self._draw = draw  # where a retry falls within the reconnect schedule's jitter
        self.spec = spec
        self.transport = transport
        self.nursery = nursery
        self.session = ClientSession(capabilities=capabilities)
        self.writes = WritePath(transport, self.session, nursery, self._write_failed, self._unencodable)
        self.initialized = trio.Event()
        # server/discover in flight: a failure of the connection is the probe's answer
        # (the era decides what follows), not the attempt's end.
        self.probing = False
        self.probe_done: trio.Event | None = None  # made when the probe is sent
        self.probe_answer: DiscoverAnswered | None = None
        self.probe_closed: str | None = None
        self.deadline_scope = trio.CancelScope()
        self._inflight = inflight
        self.report = report
        self._redactor = redactor
        self._server_log = ServerLog(self.name, redactor, nursery, log_sink)
        self.levels = levels or LogLevels(spec.log_level)  # the actor's: whose logs are wanted
        self._server_requests = ServerRequests(inflight, server_requests)
        self._internal: dict[RequestId, trio.MemorySendChannel[ResponseReceived | ErrorReceived]] = {}
        self.rounds = RoundTrips(self.name, inflight, nursery, self._server_requests.for_call, self._resend)
        self._stale_timer: trio.CancelScope | None = None  # made at a listing with a TTL
        self._updated = updated  # notifications/resources/updated, by URI
        self.features = ServerFeatures()  # what the server declared, once the era is settled
        self.pending: set[Kind] = set()  # kinds whose list changed since they were read
        # The tools as this connection last listed them: a call is sent only on the
        # definition it was decided on (``send_call``).
        self.definitions = Fingerprints({})
        self.listener = ChangeListener(self, own=not transport.abilities.listens)
        self.attempt_span = NO_ATTEMPT  # the attempt's span, while it lasts: our first requests' parent

    def listed(self, tools: Sequence[Tool]) -> None:
        """The server listed ``tools`` (the first of a name counts, as in the catalog):
        calls sent from now on are checked against them."""
        self.definitions = Fingerprints({tool.name: tool for tool in reversed(tools)})

    def list_expires(self, ttls: Sequence[int]) -> None:
        """A listing whose pages carried ``ttls`` (``ttlMs``) was published: when it
        goes stale, list again as after ``list_changed`` (``freshness.py``). A newer
        listing restarts the timer."""
        if self._stale_timer is not None:
            self._stale_timer.cancel()
        self._stale_timer = timer = trio.CancelScope()
        delay = refetch_after(ttls)
        if delay is not None:
            self.nursery.start_soon(self._stale_after, delay, timer)

    async def _stale_after(self, delay: float, timer: trio.CancelScope) -> None:
        with timer:
            await trio.sleep(delay)
            self.changed({Kind.TOOLS})

    def changed(self, kinds: Iterable[Kind]) -> None:
        """These kinds' lists changed: note which, and tell the machine (which decides
        when to read again; ``take_pending`` then says what)."""
        self.pending.update(kinds)
        self.report(LIST_CHANGED)

    def take_pending(self) -> frozenset[Kind]:
        """The kinds to read again (all, if none was noted), forgotten from now on."""
        pending, self.pending = frozenset(self.pending), set()
        return pending or ALL_KINDS

    def redact(self, text: str) -> str:
        """The server's text with our secrets masked."""
        return self._redactor.redact(text)

    def start_reading(self) -> None:
        """Start the reader (before the opening is sent, and outside any span: its task
        would keep a span current after it ended)."""
        self.nursery.start_soon(self._reader)

    def send_opening(self, first: Opening, meta: Mapping[str, str] | None = None) -> None:
        """Send what opens the era: the probe, or ``initialize`` (``meta``: the opening's
        trace context, ``era_probe.py``)."""
        if first is Opening.PROBE:
            self.probing = True
            self.probe_done = trio.Event()
            self.session.start_discover(meta=meta)
        else:
            self.session.start_initialize(meta)
        self.writes.kick()

    def fail(self, reason: str, *, auth: bool = False, needs_login: bool = False) -> None:
        """The connection is dead: report it (the machine says what follows), unless
        the probe is out, whose answer it then is."""
        if self.probing and not auth and self.probe_done is not None:  # made with probing
            self.probe_closed = reason if self.probe_closed is None else self.probe_closed
            self.probe_done.set()
            return
        tail = self.transport.stderr_tail()
        if tail:
            reason = f"{reason} (last stderr line: {tail[-1][:200]})"
        now = trio.current_time()
        self.report(Failed(self._redactor.redact(reason), now, auth, needs_login, self._draw()))

    def _write_failed(self, exc: TransportError) -> None:
        if isinstance(exc, AuthRequired):  # e.g. the initialize POST was refused
            self.fail(str(exc), auth=True, needs_login=exc.needs_login)
        else:
            self.fail(f"mcp server {self.name}: cannot write: {exc}")

    def _unencodable(self, exc: Unencodable) -> None:
        """A message JSON cannot carry was left unsent: a call's arguments (its caller
        is answered); anything else of ours is a bug, logged."""
        message = exc.message
        entry = self._inflight.pop(message.id) if isinstance(message, Request) else None
        if entry is None:
            log.error("cannot send %s", exc, extra={"server": self.name})
            return
        self.session.forget(entry.request_id)
        answer(
            entry.call.reply,
            CallFailed("invalid_arguments", f"invalid arguments for {entry.call.tool}: {exc}"),
        )

    # ------------------------------------------------------------------ reading

    async def _reader(self) -> None:
        try:
            while True:
                messages = await self.transport.receive()
                if not messages:
                    raise TransportClosed(f"mcp server {self.name} closed the connection")
                self.session.receive_messages(messages)
                self._handle_events()
        except AuthRequired as exc:
            self.fail(str(exc), auth=True, needs_login=exc.needs_login)
        except TransportError as exc:
            self.fail(str(exc))
        except ProtocolError as exc:
            self.fail(f"mcp server {self.name} broke the protocol: {exc}")

    def _handle_events(self) -> None:
        session = self.session
        answered = 0
        while (event := session.next_event()) is not None:
            if isinstance(event, ResponseReceived | ErrorReceived):
                waiter = self._internal.pop(event.id, None)
                if waiter is not None:
                    answer(waiter, event)
                else:
                    self._finish_call(event)
                    answered += 1
            elif isinstance(event, ProgressReceived):
                self._progress(event)
            elif isinstance(event, ToolsListChanged | ResourcesListChanged | PromptsListChanged):
                if self.listener.hears(event.subscription):
                    self.changed({CHANGED_KIND[type(event)]})
            elif isinstance(event, ListenAcknowledged):
                self.listener.acknowledged(event)
            elif isinstance(event, Cancelled):
                self.listener.cancelled(event.request_id)
            elif isinstance(event, ResourceChanged):
                self._updated(event.uri)
            elif isinstance(event, LogMessage):
                route = self.levels.route(event, self._inflight, session.era)
                self._server_log.take(event, self.levels.own, *route)
            elif isinstance(event, Initialized):
                self.initialized.set()
            elif isinstance(event, Adopted):  # the probe's answer came after the fall back
                log.info(
                    "server/discover answered after the probe gave up; speaking %s",
                    session.version,
                    extra={"fields": {"server": self.name}},
                )
                self.initialized.set()
            elif isinstance(event, DiscoverAnswered):
                self.probe_answer = event
                if self.probe_done is not None:
                    self.probe_done.set()
            elif isinstance(event, ServerRequest):
                handler = self._server_requests.for_request(event)
                if handler is None:
                    refuse(session, event)
                else:
                    self.nursery.start_soon(
                        answer_request, self.name, session, handler, event, self.writes.kick
                    )
            else:
                log.debug("ignored %s", type(event).__name__, extra={"server": self.name})
        self.writes.answered_last = answered
        # Wake the writer only for something to write (a ping answer, an error for an
        # unhandled request …), not after every answer read: one task switch less a call.
        if session.wants_to_send:
            self.writes.kick()

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        sent: Callable[[RequestId], None] | None = None,
    ) -> ResponseReceived | ErrorReceived:
        """One request of our own (``tools/list``, ``ping``), answered to this task;
        ``sent`` is told its id before anything of the server's is read. Traced
        (``own_requests.py``) when traces are on."""
        tracing = HOOK.tracing
        if tracing is None or method == LISTEN:  # a listen is a stream as long as the connection
            return await self.send_own(method, params, sent)
        return await traced_request(tracing, self, method, params, sent)

    async def send_own(
        self,
        method: str,
        params: dict[str, Any] | None,
        sent: Callable[[RequestId], None] | None,
        meta: Mapping[str, str] | None = None,
    ) -> ResponseReceived | ErrorReceived:
        """``request``'s sending and waiting, ``meta`` (a trace's context) in ``_meta``."""
        reply, answers = trio.open_memory_channel[ResponseReceived | ErrorReceived](1)
        request_id = self.session.send_request(method, params, meta=meta)
        if sent is not None:
            sent(request_id)
        self._internal[request_id] = reply
        self.writes.kick()
        try:
            return await answers.receive()
        finally:
            if self._internal.pop(request_id, None) is not None:
                self.session.forget(request_id)

    # -------------------------------------------------------------------- calls

    def send_call(self, call: CallTool) -> None:
        """Send one ``tools/call``, or another request of the surface (the machine said
        calls are sent); the caller's capabilities ride in the per-request era's ``_meta``.
        A call decided on another definition of its tool than the listed one is answered
        ``Redefined`` instead."""
        definition = call.definition
        if definition and self.definitions[call.tool] != definition and self._redefined(call):
            return
        request_id = self._send_request(call, call_params(call))
        entry = self._inflight.add(request_id, call, trio.current_time())
        self._watch(entry)
        self.writes.call_queued(len(self._inflight))

    def _redefined(self, call: CallTool) -> bool:
        """Answer ``Redefined`` with the tool as listed (True); a tool the server no
        longer lists is sent as before (False), and the server answers it."""
        tool = self.definitions.tools.get(call.tool)
        if tool is None:
            return False
        answer(call.reply, Redefined(tool))
        return True

    def _resend(self, entry: InFlight, answers: Mapping[str, Mapping[str, Any]], state: str | None) -> None:
        """A call that asked for input goes again, with the answers and the state."""
        request_id = self._send_request(entry.call, retry_params(call_params(entry.call), answers, state))
        self._inflight.resume(entry, request_id, trio.current_time())
        self._watch(entry)
        self.writes.kick()

    def _send_request(self, call: CallTool, params: dict[str, Any]) -> RequestId:
        """Queue a call's request: the caller's capabilities and log level, and a traced
        call's context (``actors/tracing.py``), in its ``_meta``."""
        client, trace, session = call.client, call.trace, self.session
        caps = client.capabilities if client else None
        # Only a per-request-era request carries a log level (a handshake-era session has
        # no _meta stamp to put it in): not worked out for every call.
        level = self.levels.for_call(client) if session.era is Era.PER_REQUEST else None
        meta = None if trace is None else trace.meta
        request_id = session.send_request(
            call.method, params, progress=True, capabilities=caps, log_level=level, meta=meta
        )
        if trace is not None:
            trace.sent(request_id, session.version)
        return request_id

    def _watch(self, entry: InFlight) -> None:
        if entry.deadline < self.deadline_scope.deadline:
            self.deadline_scope.deadline = entry.deadline

    def cancel(self, entry: InFlight, reason: str) -> None:
        """The caller gave up: tell the server (unless the call waits for the host's
        input: nothing is open there), stop the host's handler, answer ``cancelled``."""
        if self._inflight.unpark(entry):
            if entry.scope is not None:
                entry.scope.cancel()
        else:
            self._inflight.pop(entry.request_id)
            self.session.send_cancelled(entry.request_id, reason)
            self.writes.kick()
        answer(entry.call.reply, CallFailed("cancelled", f"{describe(entry.call)} was cancelled"))

    def _finish_call(self, event: ResponseReceived | ErrorReceived) -> None:
        entry = self._inflight.pop(event.id)
        if entry is None:
            return  # answered already (timed out or cancelled): drop the late answer
        outcome: CallOutcome
        if isinstance(event, ErrorReceived):
            error, redact = event.error, self._redactor
            said = ErrorObject(error.code, redact.redact(error.message), redact.redact_json(error.data))
            outcome = server_error(self.name, entry.call, said, self.session.era)
        else:
            try:
                required = input_required(event.result) if self.session.era is Era.PER_REQUEST else None
                if required is not None:
                    if (failed := self.rounds.begin(entry, required)) is None:
                        return  # the host is asked; the retry answers the call
                    outcome = failed
                elif entry.call.method != "tools/call":
                    outcome = Answered(event.result)
                else:
                    outcome = CallSucceeded(structure_call_result(event.result))
            except ProtocolError as exc:
                outcome = CallFailed("server_error", f"mcp server {self.name}: {exc}")
        answer(entry.call.reply, outcome)

    def _progress(self, event: ProgressReceived) -> None:
        entry = self._inflight.get(event.token)
        if entry is None:
            return
        self._inflight.touch(event.token, trio.current_time())
        if entry.call.progress is not None:
            # A slow or departed listener loses progress, never the call.
            try_send(entry.call.progress, event)

    async def watch_deadlines(self) -> None:
        """Answer calls past their deadline with a timeout (and tell the server)."""
        while True:
            with trio.CancelScope(deadline=self._inflight.next_deadline()) as self.deadline_scope:
                await trio.sleep_forever()
            for entry in self._inflight.expired(trio.current_time()):
                capped = entry.deadline >= entry.hard_deadline
                limit = entry.max_s if capped else entry.timeout_s
                self.session.send_cancelled(entry.request_id, f"timed out after {limit:g} s")
                text = f"mcp server {self.name} did not answer {describe(entry.call)} within {limit:g} s"
                answer(entry.call.reply, CallFailed("timeout", text))
                self.report(CallTimedOut(entry.call.tool))
            self.writes.kick()
