"""ConnectionActor: one supervised connection to one MCP server.

The actor owns one nursery. Its main task reads the mailbox, taking everything queued
before it yields, and answers at once (calls are written out, parked, or refused
without waiting). A lifecycle task walks the state machine of ``states.py``: connect,
handshake, list, serve, and on failure back off on the reconnect schedule and try
again. While a connection is up, the reader (bytes in, events out) lives in a nursery
owned by that connection attempt, and a writer task joins it only while something is
queued (so calls taken together leave in one write; a lone call on a transport that can
write without waiting is written at once by the main task); once steady, the lifecycle
task watches call deadlines. When the connection dies, every call
in flight is answered at once; nothing waits for a reconnect.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from actors.connection.calls import InFlightTable
from actors.connection.messages import (
    CallFailed,
    CallOutcome,
    CallSucceeded,
    CallTool,
    CancelCall,
    Command,
    ConnectionMessage,
    ConnectionStatus,
    Control,
    EnsureStarted,
    GetStatus,
    Published,
    StateChanged,
    ToolsListed,
)
from actors.connection.schedule import ReconnectSchedule
from actors.connection.spec import ServerSpec, Start
from actors.connection.states import STARTING_STATES, State, Trigger, transition
from actors.mailbox import answer, queued, try_send
from actors.protocol.codec import structure_call_result
from actors.protocol.errors import ProtocolError
from actors.protocol.messages import INTERNAL_ERROR, RequestId, Tool
from actors.protocol.session import (
    ClientSession,
    ErrorReceived,
    Initialized,
    ProgressReceived,
    ResponseReceived,
    ServerRequest,
    ToolsListChanged,
    method_not_found,
    parse_tools_page,
)
from actors.redaction import Redactor
from actors.transports.base import AuthRequired, Connector, Transport, TransportClosed, TransportError

log = logging.getLogger("actors.connection")

ServerRequestHandler = Callable[[str, str, Any], Awaitable[Mapping[str, Any] | None]]
"""``(server, method, params) -> result``, or None when the host does not handle ``method``."""

MAX_TOOLS_PAGES = 1000
PUBLISH_TIMEOUT_S = 5.0

_CONTROL_TRIGGERS = {
    Control.STOP: (Trigger.STOP, Trigger.TORN_DOWN_STOP),
    Control.DISABLE: (Trigger.DISABLE, Trigger.TORN_DOWN_DISABLE),
    Control.RESTART: (Trigger.RESTART, Trigger.TORN_DOWN_RESTART),
}


class ConnectionFailed(Exception):
    """The server misbehaved in a way that ends this connection (not the actor)."""


@attrs.frozen(slots=True)
class Crashed:
    """Start parked: the actor this one replaces crashed past the supervisor's restart
    intensity. The new one waits ``retry_in_s`` in backoff (condition ``crashed``)."""

    reason: str
    retry_in_s: float


@attrs.define(eq=False)
class _Live:
    """One connection attempt: its transport, protocol session and nursery."""

    transport: Transport
    session: ClientSession
    nursery: trio.Nursery
    backlog: list[bytes] = attrs.field(factory=list)  # taken from the session, not yet written
    writer_running: bool = False  # a writer task exists (it ends when nothing is left to write)
    writing: bool = False  # the writer is inside transport.send
    answered_last: int = 0  # calls answered by the last read: more than one, callers are many
    # A transport that can write without waiting (stdio's send_nowait), else None.
    send_now: Callable[[bytes], int] | None = attrs.field(
        default=attrs.Factory(lambda live: getattr(live.transport, "send_nowait", None), takes_self=True)
    )
    initialized: trio.Event = attrs.field(factory=trio.Event)
    internal: dict[RequestId, trio.MemorySendChannel[ResponseReceived | ErrorReceived]] = attrs.field(
        factory=dict
    )
    deadline_scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    accepting_calls: bool = False
    relist_requested: bool = False
    relisting: bool = False
    pinging: bool = False
    failure: str | None = None
    needs_auth: bool = False  # the failure was an auth refusal that retrying will not fix


class ConnectionActor:
    """Keeps one MCP server connected, and answers every call exactly once."""

    def __init__(
        self,
        spec: ServerSpec,
        connector: Connector,
        mailbox: trio.MemoryReceiveChannel[ConnectionMessage],
        publish: trio.MemorySendChannel[Published],
        *,
        owner: str | None = None,
        restart: bool = True,
        client_capabilities: dict[str, Any] | None = None,
        server_requests: ServerRequestHandler | None = None,
        crashed: Crashed | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.owner = owner
        self._connector = connector
        self._mailbox = mailbox
        self._publish = publish
        self._restart = restart
        self._capabilities = client_capabilities or {}
        self._server_requests = server_requests
        self._schedule = ReconnectSchedule(spec.reconnect_schedule_s, spec.reset_after_s)
        self._redactor = Redactor(spec.secrets)
        self._inflight = InFlightTable(spec.call_timeout_s, spec.max_call_timeout_s)
        self._parked: list[CallTool] = []
        self._live: _Live | None = None
        self._wake = trio.Event()
        self._attempt_scope: trio.CancelScope | None = None
        self._control: Control | None = None if spec.enabled else Control.DISABLE
        self._needed = spec.start is Start.EAGER
        self._starting = False
        self._attempt = 0
        self._steady_since: float | None = None
        self._next_retry_at: float | None = None
        self._condition: str | None = None  # "needs_auth": parked in backoff until a restart
        self._generation = 0
        self._stopped = False
        self._stderr: tuple[str, ...] = ()  # the last stderr tail seen, kept after a crash
        self._crashed = crashed
        self.state = State.IDLE
        self.unavailable = f"mcp server {self.name} is unavailable"

    # ---------------------------------------------------------------- main task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until stopped (Command STOP) or cancelled; teardown is always complete."""
        try:
            async with trio.open_nursery() as nursery:
                if self._crashed is not None:
                    await self._park(self._crashed)
                nursery.start_soon(self._lifecycle, nursery.cancel_scope)
                task_status.started()
                async for message in self._mailbox:
                    self._dispatch(message)
                    # Calls that arrive together leave in one write (the writer runs after).
                    for more in queued(self._mailbox):
                        self._dispatch(more)
        finally:
            self._answer_everyone(CallFailed("unavailable", self.unavailable))
            if self._stopped:
                self._close_mailbox()

    def _dispatch(self, message: ConnectionMessage) -> None:
        if isinstance(message, CallTool):
            live = self._live
            if live is not None and live.accepting_calls:
                self._send_call(live, message)
            elif self._starting or (self.state is State.IDLE and self._control is None):
                self._parked.append(message)
                self._need()
            else:
                answer(message.reply, CallFailed("unavailable", self.unavailable))
        elif isinstance(message, CancelCall):
            self._cancel_call(message)
        elif isinstance(message, EnsureStarted):
            self._need()
        elif isinstance(message, GetStatus):
            live = self._live
            if live is not None:
                self._stderr = tuple(live.transport.stderr_tail())
            transport = live.transport.describe() if live is not None else None
            answer(message.reply, ConnectionStatus(self._stderr, len(self._inflight), transport))
        else:
            self._command(message)

    def _need(self) -> None:
        if self.state is State.IDLE and not self._needed:
            self._needed = True
            self._wake.set()

    def _command(self, message: Command) -> None:
        if self._control is not Control.STOP:  # a stop is final; nothing overrides it
            self._control = message.control
        if self._attempt_scope is not None and message.control is not Control.ENABLE:
            self._attempt_scope.cancel()
        self._wake.set()

    def _cancel_call(self, message: CancelCall) -> None:
        for parked in self._parked:
            if parked.reply is message.reply:
                self._parked.remove(parked)
                answer(parked.reply, CallFailed("cancelled", f"tools/call {parked.tool} was cancelled"))
                return
        entry = self._inflight.by_reply(message.reply)
        live = self._live
        if entry is None or live is None:
            return
        self._inflight.pop(entry.request_id)
        live.session.send_cancelled(entry.request_id, message.reason)
        self._kick(live)
        answer(entry.call.reply, CallFailed("cancelled", f"tools/call {entry.call.tool} was cancelled"))

    # ----------------------------------------------------------------- lifecycle

    async def _lifecycle(self, actor_scope: trio.CancelScope) -> None:
        while True:
            control, self._control = self._control, None
            if control is not None:
                if await self._apply_control(control):
                    self._stopped = True
                    actor_scope.cancel()
                    return
            elif self.state is State.IDLE:
                if self._needed:
                    self._starting = True
                    await self._transition(Trigger.NEEDED)
                else:
                    await self._wait_wake()
            elif self.state is State.DISABLED:
                await self._wait_wake()
            elif self.state is State.BACKOFF:
                if not await self._wait_wake(self._next_retry_at or math.inf):
                    self._next_retry_at = None
                    await self._transition(Trigger.RETRY)
            elif self.state is State.RESOLVE:
                await self._connect_and_serve()
            else:  # pragma: no cover - the table makes this unreachable
                raise RuntimeError(f"lifecycle stuck in {self.state.value}")

    async def _park(self, crashed: Crashed) -> None:
        """Wait in backoff at the schedule's last delay; a failure after the retry then
        keeps that delay too."""
        self._attempt = len(self._schedule.delays)
        self._next_retry_at = trio.current_time() + crashed.retry_in_s
        self._condition = "crashed"
        await self._transition(Trigger.CRASHED, self._redactor.redact(crashed.reason))

    async def _apply_control(self, control: Control) -> bool:
        """Carry out an operator command; True when the actor is now stopped."""
        if control is Control.ENABLE:
            if self.state is State.DISABLED:
                await self._transition(Trigger.ENABLE)
                self._needed = self.spec.start is Start.EAGER
            return False
        trigger, torn_down = _CONTROL_TRIGGERS[control]
        if self.state is State.STOPPED:
            return True
        if self.state is not State.TEARDOWN:
            if self.state is State.DISABLED and control is not Control.STOP:
                return False
            if control is Control.RESTART:
                self._attempt = 0
                self._next_retry_at = None
            await self._transition(trigger)
        if self._state_is(State.TEARDOWN):
            await self._transition(torn_down)
        if self._state_is(State.IDLE):
            self._needed = False
        return self._state_is(State.STOPPED)

    def _state_is(self, state: State) -> bool:
        # A method, so mypy does not keep a narrowing from before the awaits above.
        return self.state is state

    async def _wait_wake(self, deadline: float = math.inf) -> bool:
        """Sleep until dispatch wakes us (True) or the deadline passes (False)."""
        self._wake = trio.Event()
        with trio.move_on_at(deadline):
            await self._wake.wait()
            return True
        return False

    async def _connect_and_serve(self) -> None:
        """One connection attempt, from resolve to its end (failure or a command)."""
        init_scope = trio.CancelScope(deadline=trio.current_time() + self.spec.init_timeout_s)
        live: _Live | None = None
        with trio.CancelScope() as self._attempt_scope:
            try:
                with init_scope:
                    async with self._connector(self.spec) as transport:
                        try:
                            await self._transition(Trigger.RESOLVED)
                            authenticate = getattr(transport, "authenticate", None)
                            if authenticate is not None:  # remote: stored token, refresh, …
                                await authenticate()
                            await self._transition(Trigger.AUTHENTICATED)
                            async with trio.open_nursery() as nursery:
                                live = _Live(transport, self._new_session(), nursery)
                                self._live = live
                                await self._serve(live, init_scope)
                        finally:
                            with trio.CancelScope(shield=True):
                                await self._end_attempt(live, init_scope)
                if init_scope.cancelled_caught and self.state in STARTING_STATES:
                    await self._enter_backoff(self._init_timeout_text())
            except AuthRequired as exc:  # authenticate: nothing to send it with
                await self._enter_backoff(str(exc), needs_auth=exc.needs_login)
            except TransportError as exc:  # the transport could not even start
                await self._enter_backoff(str(exc))
        self._attempt_scope = None

    def _new_session(self) -> ClientSession:
        return ClientSession(capabilities=self._capabilities)

    async def _serve(self, live: _Live, init_scope: trio.CancelScope) -> None:
        live.nursery.start_soon(self._reader, live)
        try:
            live.session.start_initialize()
            self._kick(live)
            await live.initialized.wait()
            await self._transition(Trigger.INITIALIZED)
            await self._list_tools(live)
        except (ConnectionFailed, ProtocolError) as exc:
            self._fail(live, str(exc))
            return
        init_scope.deadline = math.inf
        await self._transition(Trigger.LISTED)
        self._steady_since = trio.current_time()
        self._starting = False
        live.accepting_calls = True
        parked, self._parked = self._parked, []
        for call in parked:
            self._send_call(live, call)
        if live.relist_requested:
            self._request_relist(live)
        # Calls flow from here on; this task watches their deadlines (one task fewer
        # per connection than a watcher of its own).
        await self._deadline_watcher(live)

    async def _end_attempt(self, live: _Live | None, init_scope: trio.CancelScope) -> None:
        """Before the transport is torn down: settle calls and move the state on."""
        self._live = None
        if live is not None:
            self._stderr = tuple(live.transport.stderr_tail())
        if live is not None and live.failure is not None:
            await self._enter_backoff(live.failure, needs_auth=live.needs_auth)
        elif init_scope.cancel_called and self.state in STARTING_STATES and self._control is None:
            await self._enter_backoff(self._init_timeout_text())
        elif self._control in _CONTROL_TRIGGERS:
            self._answer_everyone(CallFailed("unavailable", self.unavailable))
            control = self._control
            assert control is not None
            await self._transition(_CONTROL_TRIGGERS[control][0])
        else:  # cancelled from outside: the supervisor is going away
            self._answer_everyone(CallFailed("cancelled", f"call cancelled: mcp server {self.name} stopped"))

    def _init_timeout_text(self) -> str:
        ms = round(self.spec.init_timeout_s * 1000)
        return f"mcp server {self.name} did not finish initialize and tools/list within {ms} ms"

    async def _enter_backoff(self, reason: str, *, needs_auth: bool = False) -> None:
        """Fail everything waiting and schedule the next attempt. ``needs_auth``: no
        attempt is scheduled (a retry cannot fix it); the server waits in the
        ``needs_auth`` condition for a restart, e.g. after ``auth login``."""
        reason = self._redactor.redact(reason)
        self._starting = False
        self._answer_everyone(CallFailed("unavailable", self.unavailable))
        now = trio.current_time()
        steady_for = None if self._steady_since is None else now - self._steady_since
        self._steady_since = None
        self._attempt = self._schedule.next_attempt(self._attempt, steady_for)
        self._condition = "needs_auth" if needs_auth else None
        if needs_auth:
            self._next_retry_at = None
        elif self._restart:
            self._next_retry_at = now + self._schedule.delay(self._attempt)
        else:
            self._next_retry_at = None
            if self._control is None:
                self._control = Control.STOP  # session scope: never restarted
        await self._transition(Trigger.FAILED, reason)

    def _answer_everyone(self, outcome: CallFailed) -> None:
        for entry in self._inflight.drain():
            answer(entry.call.reply, outcome)
        parked, self._parked = self._parked, []
        for call in parked:
            answer(call.reply, outcome)

    # -------------------------------------------------------- connection tasks

    def _fail(self, live: _Live, reason: str, *, auth: bool = False, needs_login: bool = False) -> None:
        """The connection is dead: answer every call in flight now, end the attempt."""
        if live.failure is not None:
            return
        tail = live.transport.stderr_tail()
        if tail:
            reason = f"{reason} (last stderr line: {tail[-1][:200]})"
        live.failure = reason
        live.needs_auth = needs_login
        live.accepting_calls = False
        for entry in self._inflight.drain():
            if auth:  # the model sees the sanitized text, never the server's 401 body
                outcome = CallFailed("auth_failed", "authentication failed")
            else:
                message = f"MCP server stopped responding during tools/call {entry.call.tool}"
                outcome = CallFailed("unavailable", message)
            answer(entry.call.reply, outcome)
        live.nursery.cancel_scope.cancel()

    def _kick(self, live: _Live) -> None:
        """Something is queued to write: start a writer unless one is on its way. It
        runs after the current task yields, so what is queued meanwhile leaves with it."""
        if not live.writer_running:
            live.writer_running = True
            live.nursery.start_soon(self._writer, live)

    async def _writer(self, live: _Live) -> None:
        # Lives only while there is something to write: an idle connection keeps no
        # writer task (~2.6 KB each), and a lone call never needs one (_write_now).
        try:
            while True:
                data = live.session.data_to_send()
                if live.backlog:  # taken from the session earlier: it goes first
                    data = b"".join((*live.backlog, data))
                    live.backlog.clear()
                if not data:
                    return
                live.writing = True
                await live.transport.send(data)
                live.writing = False
        except AuthRequired as exc:  # e.g. the initialize POST was refused
            self._fail(live, str(exc), auth=True, needs_login=exc.needs_login)
        except TransportError as exc:
            self._fail(live, f"mcp server {self.name}: cannot write: {exc}")
        finally:
            live.writer_running = False

    async def _reader(self, live: _Live) -> None:
        try:
            while True:
                data = await live.transport.receive()
                if not data:
                    raise TransportClosed(f"mcp server {self.name} closed the connection")
                live.session.receive_data(data)
                self._handle_events(live)
        except AuthRequired as exc:
            self._fail(live, str(exc), auth=True, needs_login=exc.needs_login)
        except TransportError as exc:
            self._fail(live, str(exc))
        except ProtocolError as exc:
            self._fail(live, f"mcp server {self.name} broke the protocol: {exc}")

    def _handle_events(self, live: _Live) -> None:
        session = live.session
        answered = 0
        while (event := session.next_event()) is not None:
            if isinstance(event, ResponseReceived | ErrorReceived):
                waiter = live.internal.pop(event.id, None)
                if waiter is not None:
                    answer(waiter, event)
                else:
                    self._finish_call(event)
                    answered += 1
            elif isinstance(event, ProgressReceived):
                self._progress(event)
            elif isinstance(event, ToolsListChanged):
                self._request_relist(live)
            elif isinstance(event, Initialized):
                live.initialized.set()
            elif isinstance(event, ServerRequest):
                if self._server_requests is None:
                    method_not_found(session, event)
                else:
                    live.nursery.start_soon(self._answer_server_request, live, self._server_requests, event)
            else:
                log.debug("ignored %s", type(event).__name__, extra={"server": self.name})
        live.answered_last = answered
        # Wake the writer only for something to write (a ping answer, an error for an
        # unhandled request …), not after every answer read: one task switch less a call.
        data = session.data_to_send()
        if data:
            live.backlog.append(data)
            self._kick(live)

    async def _answer_server_request(
        self, live: _Live, handler: ServerRequestHandler, request: ServerRequest
    ) -> None:
        """Sampling, elicitation, roots …: the host's handler answers; None means it does
        not handle that method. Its failure is the server's error answer, never ours."""
        try:
            result = await handler(self.name, request.method, request.params)
        except Exception as exc:
            log.warning(
                "server request handler failed",
                exc_info=exc,
                extra={"fields": {"server": self.name, "method": request.method}},
            )
            live.session.send_error(request.id, INTERNAL_ERROR, f"client failed to handle {request.method}")
        else:
            if result is None:
                method_not_found(live.session, request)
            else:
                live.session.send_response(request.id, result)
        self._kick(live)

    def _finish_call(self, event: ResponseReceived | ErrorReceived) -> None:
        entry = self._inflight.pop(event.id)
        if entry is None:
            return  # answered already (timed out or cancelled): drop the late answer
        outcome: CallOutcome
        if isinstance(event, ErrorReceived):
            outcome = CallFailed(
                "server_error",
                f"mcp server {self.name} answered tools/call {entry.call.tool} with error "
                f"{event.error.code}: {self._redactor.redact(event.error.message)}",
            )
        else:
            try:
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

    def _send_call(self, live: _Live, call: CallTool) -> None:
        params = {"name": call.tool, "arguments": dict(call.arguments)}
        try:
            request_id = live.session.send_request("tools/call", params, progress=True)
        except ValueError as exc:
            answer(call.reply, CallFailed("invalid_arguments", f"invalid arguments for {call.tool}: {exc}"))
            return
        entry = self._inflight.add(request_id, call, trio.current_time())
        if entry.deadline < live.deadline_scope.deadline:
            live.deadline_scope.deadline = entry.deadline
        # A lone call (the only one in flight, after a read that answered at most one)
        # goes out now, from this task: no writer wake-up. Calls made together, or by
        # many callers whose answers came together, are left to the writer, which
        # sends them in one write.
        if len(self._inflight) > 1 or live.answered_last > 1 or not self._write_now(live):
            self._kick(live)

    def _write_now(self, live: _Live) -> bool:
        """Write what the session queued without waiting, if the transport can and the
        writer is idle; False when something is left for the writer."""
        if live.send_now is None or live.writing or live.backlog:
            return False
        data = live.session.data_to_send()
        written = live.send_now(data)
        if written < len(data):
            live.backlog.append(data[written:])
            return False
        return True

    async def _deadline_watcher(self, live: _Live) -> None:
        while True:
            with trio.CancelScope(deadline=self._inflight.next_deadline()) as live.deadline_scope:
                await trio.sleep_forever()
            for entry in self._inflight.expired(trio.current_time()):
                capped = entry.deadline >= entry.hard_deadline
                limit = self.spec.max_call_timeout_s if capped else self.spec.call_timeout_s
                live.session.send_cancelled(entry.request_id, f"timed out after {limit:g} s")
                text = (
                    f"mcp server {self.name} did not answer tools/call {entry.call.tool} within {limit:g} s"
                )
                answer(entry.call.reply, CallFailed("timeout", text))
                if not live.pinging:
                    live.pinging = True
                    live.nursery.start_soon(self._check_alive, live, entry.call.tool)
            self._kick(live)

    async def _check_alive(self, live: _Live, tool: str) -> None:
        """After a timeout, a hung server (one that answers not even ping) is restarted."""
        with trio.move_on_after(self.spec.ping_timeout_s):
            await self._request(live, "ping")
            live.pinging = False
            return
        self._fail(
            live,
            f"mcp server {self.name} did not answer ping within {self.spec.ping_timeout_s:g} s "
            f"after tools/call {tool} timed out",
        )

    async def _request(
        self, live: _Live, method: str, params: dict[str, Any] | None = None
    ) -> ResponseReceived | ErrorReceived:
        reply, answers = trio.open_memory_channel[ResponseReceived | ErrorReceived](1)
        request_id = live.session.send_request(method, params)
        live.internal[request_id] = reply
        self._kick(live)
        try:
            return await answers.receive()
        finally:
            if live.internal.pop(request_id, None) is not None:
                live.session.forget(request_id)

    # ------------------------------------------------------------------ listing

    async def _list_tools(self, live: _Live) -> None:
        """Read every page; repeat while list_changed keeps arriving; publish."""
        while True:
            live.relist_requested = False
            tools: list[Tool] = []
            problems: list[str] = []
            cursor: str | None = None
            seen: set[str] = set()
            for _ in range(MAX_TOOLS_PAGES):
                event = await self._request(live, "tools/list", {"cursor": cursor} if cursor else None)
                if isinstance(event, ErrorReceived):
                    raise ConnectionFailed(
                        f"mcp server {self.name} refused tools/list: {event.error.message}"
                    )
                page = parse_tools_page(event.result)
                tools.extend(page.tools)
                problems.extend(page.problems)
                cursor = page.next_cursor
                if cursor is None:
                    break
                if cursor in seen:
                    raise ConnectionFailed(f"mcp server {self.name} repeated tools/list cursor {cursor!r}")
                seen.add(cursor)
            else:
                raise ConnectionFailed(f"mcp server {self.name}: tools/list has over {MAX_TOOLS_PAGES} pages")
            for problem in problems:
                log.warning("tool dropped: %s", problem, extra={"server": self.name})
            self._generation += 1
            await self._send_published(
                ToolsListed(self.name, self._generation, tuple(tools), tuple(problems), self.owner)
            )
            if not live.relist_requested:
                return

    def _request_relist(self, live: _Live) -> None:
        live.relist_requested = True
        if self.state is State.STEADY and not live.relisting:
            live.relisting = True
            live.nursery.start_soon(self._relist, live)

    async def _relist(self, live: _Live) -> None:
        if self.state is not State.STEADY or live.failure is not None:
            live.relisting = False
            return  # the connection ended before this task got to run
        try:
            await self._transition(Trigger.LIST_CHANGED)
            with trio.fail_after(self.spec.init_timeout_s):
                await self._list_tools(live)
            await self._transition(Trigger.LISTED)
        except trio.TooSlowError:
            self._fail(live, f"mcp server {self.name} did not answer tools/list after list_changed")
        except (ConnectionFailed, ProtocolError) as exc:
            self._fail(live, str(exc))
        finally:
            live.relisting = False

    # ---------------------------------------------------------------- publishing

    async def _transition(self, trigger: Trigger, reason: str | None = None) -> None:
        previous = self.state
        self.state = transition(previous, trigger)
        if self.state is not State.BACKOFF:
            self._condition = None
        now = trio.current_time()
        retry_in = None if self._next_retry_at is None else max(0.0, self._next_retry_at - now)
        fields: dict[str, Any] = {"server": self.name, "state": self.state.value, "prev": previous.value}
        if self.state is State.BACKOFF:
            fields["attempt"] = self._attempt
            if retry_in is not None:
                fields["retry_in_s"] = round(retry_in, 3)
        if reason:
            fields["reason"] = reason
        if self._condition:
            fields["condition"] = self._condition
        if self.owner:
            fields["session"] = self.owner
        log.log(logging.WARNING if reason else logging.INFO, "state", extra={"fields": fields})
        await self._send_published(
            StateChanged(
                self.name,
                self.state,
                previous,
                now,
                self._attempt,
                reason,
                self._next_retry_at if self.state is State.BACKOFF else None,
                self.owner,
                self._condition,
            )
        )

    async def _send_published(self, message: Published) -> None:
        # Publishing may happen during a shielded teardown: bound it, so a router that
        # is gone or stuck can never hold a teardown (and its process kill) hostage.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            with trio.move_on_after(PUBLISH_TIMEOUT_S):
                await self._publish.send(message)

    def _close_mailbox(self) -> None:
        """Final stop: refuse what is still queued, then close so senders fail fast."""
        for message in queued(self._mailbox):
            if isinstance(message, CallTool):
                answer(message.reply, CallFailed("unavailable", self.unavailable))
        self._mailbox.close()
