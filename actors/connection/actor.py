"""ConnectionActor: one supervised connection to one MCP server.

The actor is the I/O loop around the state machine of ``states.py``: it reports what
happens as events, and carries out the effects the machine answers with. It decides
nothing about the connection's state itself (a test holds it to that).

It owns one nursery. Its main task reads the mailbox, taking everything queued before
it yields, and answers at once: a call is sent, parked or refused, as the machine's
``call_route`` says, without waiting. A lifecycle task follows the machine's orders:
run a connection attempt (connect, handshake, list, then watch call deadlines), sleep
until a retry, or finish. While a connection is up, its reader and writer live in a
nursery owned by that attempt (``live.py``). When the connection dies, every call in
flight is answered at once; nothing waits for a reconnect.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import trio

from actors.connection import retry
from actors.connection.calls import InFlightTable, busy, call_failure, close_mailbox
from actors.connection.era_probe import settle
from actors.connection.lister import Lister
from actors.connection.listing import ALL_KINDS, ConnectionFailed
from actors.connection.live import Live, ServerRequestHandler
from actors.connection.log_levels import LogLevels
from actors.connection.messages import (
    CallFailed,
    CallTool,
    CancelCall,
    Command,
    ConnectionMessage,
    ConnectionStatus,
    EnsureStarted,
    GetStatus,
    Published,
    Retune,
    StateChanged,
    Subscribe,
    Unsubscribe,
    WantLogs,
    unavailable,
)
from actors.connection.outbox import Outbox
from actors.connection.own_requests import check_alive
from actors.connection.retry import Draw, schedule_of
from actors.connection.server_log import LogSink
from actors.connection.states import (
    Crashed,
    Policy,
    Route,
    State,
    initial,
    log_fields,
    message_fields,
    retuned,
    step,
)
from actors.connection.subscriptions import Subscriptions
from actors.connection.vocabulary import (
    AUTHENTICATED,
    CLOSING,
    NEEDED,
    RESOLVED,
    TORN_DOWN,
    Announce,
    CancelAttempt,
    CheckAlive,
    Commanded,
    DropConnection,
    Effect,
    Effects,
    Event,
    FailCalls,
    Failed,
    Finish,
    Initialized,
    Launched,
    ListAgain,
    RetryDue,
    SendParked,
    Sleep,
    StartAttempt,
    StartRelist,
    Why,
)
from actors.log_events import get_logger
from actors.mailbox import answer, queued
from actors.protocol.era import Era, Opening, Setting, Verdict, opening, remembered_after
from actors.protocol.errors import ProtocolError
from actors.protocol.messages import ServerFeatures
from actors.redaction import Redactor
from actors.spec import ServerSpec, Start
from actors.tracing import NO_ATTEMPT, attempt_trace
from actors.transport_errors import AuthRequired, TransportError
from actors.transports.base import Connector

__all__ = ["ConnectionActor", "Crashed", "ServerRequestHandler"]

log = get_logger("actors.connection")

Order = StartAttempt | Sleep | Finish
"""What the lifecycle task does next (the machine's last order)."""

_SEND, _PARK = Route.SEND, Route.PARK


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
        known_era: Era | None = None,
        log_sink: LogSink | None = None,
        wanted_logs: str | None = None,
        draw: Draw = retry.draw,
    ) -> None:
        self.spec = spec
        self._draw = draw  # where each retry falls within the schedule's jitter
        self._log_sink = log_sink
        self.name = spec.name
        self.owner = owner
        self._connector = connector
        self._mailbox = mailbox
        self._publish = publish
        self._capabilities = client_capabilities or {}
        self._server_requests = server_requests
        self._redactor = Redactor(spec.secrets)
        self._inflight = InFlightTable(spec.call_timeout_s, spec.max_call_timeout_s)
        eager = spec.start is Start.EAGER
        self._machine = initial(Policy(schedule_of(spec), restart=restart, eager=eager, enabled=spec.enabled))
        self._crashed = crashed
        self.era = known_era  # the era found last (remembered across attempts and runs)
        self._found: Era | None = None  # the era this attempt settled on
        self._parked: list[CallTool] = []
        self._live: Live | None = None
        self._outbox: Outbox | None = None
        self._order: Order | None = None
        self._wake = trio.Event()
        self._attempt_scope: trio.CancelScope | None = None
        self._trace = NO_ATTEMPT  # the current attempt's span (``actors/tracing.py``)
        self._lister = Lister(self.name, owner, self._put, LogLevels(spec.log_level, wanted_logs))
        self._subscriptions = Subscriptions(self.name)
        self._stopped = False
        self._stderr: tuple[str, ...] = ()  # the last stderr tail seen, kept after a crash

    @property
    def state(self) -> State:
        """Where the connection stands (for tests and logs; rules read the machine)."""
        return self._machine.state

    # ---------------------------------------------------------------- main task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until stopped (Command STOP) or cancelled; teardown is always complete."""
        try:
            async with trio.open_nursery() as nursery:
                self._outbox = Outbox(self._publish, nursery)
                self._fire(Launched(trio.current_time(), self._crashed))
                nursery.start_soon(self._lifecycle, nursery.cancel_scope)
                task_status.started()
                async for message in self._mailbox:
                    self._dispatch(message)
                    # Calls that arrive together leave in one write (the writer runs after).
                    for more in queued(self._mailbox):
                        self._dispatch(more)
        finally:
            self._fail_calls(FailCalls(Why.UNAVAILABLE, Why.UNAVAILABLE))
            if self._stopped:
                close_mailbox(self._mailbox, self.name)

    def _dispatch(self, message: ConnectionMessage) -> None:
        if isinstance(message, CallTool):
            route = self._machine.call_route
            limit, refused = self.spec.concurrency, None
            if limit is not None:  # with no limit (the default) there is nothing to count
                refused = busy(limit, len(self._inflight) + len(self._parked), self.name)
            if refused is not None:
                answer(message.reply, refused)
            elif route is _SEND:  # the hot path: one attribute read decides
                live = self._live
                assert live is not None, "the machine sends calls only while connected"
                live.send_call(message)
            elif route is _PARK:  # it waits for the start, which it needs
                self._parked.append(message)
                self._fire(NEEDED)
            else:
                answer(message.reply, unavailable(self.name))
        elif isinstance(message, Subscribe | Unsubscribe):
            if self._subscriptions.take(message, self._machine.call_route, self._live):
                self._fire(NEEDED)
        elif isinstance(message, CancelCall):
            self._cancel_call(message)
        elif isinstance(message, EnsureStarted):
            self._fire(NEEDED)
        elif isinstance(message, GetStatus):
            live = self._live
            if live is not None:
                self._stderr = tuple(live.transport.stderr_tail())
            transport = live.transport.describe() if live is not None else None
            answer(message.reply, ConnectionStatus(self._stderr, len(self._inflight), transport))
        elif isinstance(message, Command):
            self._fire(Commanded(message.control))
        elif isinstance(message, Retune):
            self._retune(message.spec)
        elif isinstance(message, WantLogs):  # a handshake-era server is asked again if it changed
            self._lister.want(message.level, self._live if self._machine.call_route is _SEND else None)

    def _retune(self, spec: ServerSpec) -> None:
        """A reload changed what needs no new connection: calls sent from now on get the
        new timeouts, the next attempt the new init timeout, the machine the new schedule."""
        self.spec = spec
        self._inflight.call_timeout_s = spec.call_timeout_s
        self._inflight.max_call_s = spec.max_call_timeout_s
        if self._live is not None:
            self._live.spec = spec
        self._lister.retuned(spec.log_level, self._live if self._machine.call_route is _SEND else None)
        self._machine = retuned(
            self._machine, schedule_of(spec), eager=spec.start is Start.EAGER, enabled=spec.enabled
        )

    def _cancel_call(self, message: CancelCall) -> None:
        for parked in self._parked:
            if parked.reply is message.reply:
                self._parked.remove(parked)
                answer(parked.reply, CallFailed("cancelled", f"{parked.method} {parked.tool} was cancelled"))
                return
        entry = self._inflight.by_reply(message.reply)
        if entry is not None and self._live is not None:
            self._live.cancel(entry, message.reason)

    # ------------------------------------------------------------------ effects

    def _fire(self, event: Event) -> Effects:
        """Step the machine and carry out what it says, now, in order."""
        self._machine, effects = step(self._machine, event)
        for effect in effects:
            _EFFECTS[type(effect)](self, effect)
        return effects

    def _announce(self, change: Announce) -> None:
        now = trio.current_time()
        fields = {"server": self.name, **log_fields(change, now)}
        if self.owner:
            fields["session"] = self.owner
        if (ids := self._trace.state(change.state.value, change.reason)) is not None:  # its span's event
            fields["trace_id"], fields["span_id"] = ids
        log.log(logging.WARNING if change.reason else logging.INFO, "state", extra={"fields": fields})
        self._put(StateChanged(self.name, at=now, owner=self.owner, era=self.era, **message_fields(change)))

    def _fail_calls(self, effect: FailCalls) -> None:
        for entry in self._inflight.drain():
            answer(entry.call.reply, call_failure(effect.in_flight, entry.call.tool, self.name))
        parked, self._parked = self._parked, []
        for call in parked:
            answer(call.reply, call_failure(effect.parked, call.tool, self.name))
        self._subscriptions.fail_parked(call_failure(effect.parked, "resources/subscribe", self.name))

    def _give_order(self, order: Order) -> None:
        if isinstance(order, StartAttempt):
            # The attempt can be cancelled from now on, even before it begins.
            self._attempt_scope = trio.CancelScope()
        self._order = order
        self._wake.set()

    def _cancel_attempt(self, _: CancelAttempt) -> None:
        if self._attempt_scope is not None:
            self._attempt_scope.cancel()

    def _drop_connection(self, _: DropConnection) -> None:
        if self._live is not None:  # none yet: the attempt failed before it connected
            self._live.nursery.cancel_scope.cancel()

    def _send_parked(self, _: SendParked) -> None:
        parked, self._parked = self._parked, []
        for call in parked:
            self._connection().send_call(call)

    def _start_task(self, effect: StartRelist | CheckAlive) -> None:
        live = self._connection()
        if isinstance(effect, CheckAlive):
            live.nursery.start_soon(check_alive, live, effect.tool)
        else:
            live.nursery.start_soon(self._lister.relist, live, self._fire)

    def _connection(self) -> Live:
        live = self._live
        assert live is not None, "the machine sends and lists only while connected"
        return live

    def _put(self, message: Published) -> None:
        assert self._outbox is not None, "published before run"
        self._outbox.put(message)

    # ---------------------------------------------------------------- lifecycle

    async def _lifecycle(self, actor_scope: trio.CancelScope) -> None:
        """Follow the machine's orders: attempt, sleep (until a retry), finish."""
        while True:
            order = self._order
            if isinstance(order, StartAttempt):
                self._order = None
                await self._run_attempt()
            elif isinstance(order, Finish):
                assert self._outbox is not None
                await self._outbox.drain()
                self._stopped = True
                actor_scope.cancel()
                return
            else:
                until = math.inf if order is None or order.until is None else order.until
                if not await self._wait_wake(until) and self._order is order:
                    self._order = None
                    self._fire(RetryDue(trio.current_time()))

    async def _wait_wake(self, deadline: float) -> bool:
        """Sleep until an order wakes us (True) or the deadline passes (False)."""
        self._wake = trio.Event()
        with trio.move_on_at(deadline):
            await self._wake.wait()
            return True
        return False

    async def _run_attempt(self) -> None:
        """One connection attempt, from resolve until its transport is closed. A
        connection that closed under the era probe is opened once more for
        ``initialize``, inside the same attempt (still ``handshake``)."""
        init = trio.CancelScope(deadline=trio.current_time() + self.spec.init_timeout_s)
        assert self._attempt_scope is not None, "an attempt is ordered with its scope"
        first = opening(Setting(self.spec.protocol), self.era, handshake_only=self.spec.transport == "sse")
        self._found, self._trace = None, attempt_trace(self.name)  # no era yet; the attempt's span
        try:
            with self._attempt_scope:
                try:
                    with init:
                        if await self._connect(init, first, reopened=False):  # closed under the probe
                            await self._connect(init, Opening.INITIALIZE, reopened=True)
                    if init.cancelled_caught:
                        self._failed(self._init_timeout_text())
                except TransportError as exc:  # the transport could not even start
                    self._failed(exc)
        finally:
            self.era = remembered_after(first, self.era, self._found)
            self._attempt_scope = None
            self._fire(TORN_DOWN)
            self._trace.closed()

    async def _connect(self, init: trio.CancelScope, first: Opening, *, reopened: bool) -> bool:
        """Open the transport and serve on it; True: closed under the era probe, reopen."""
        reopen = False
        async with self._connector(self.spec) as transport:
            try:
                if not reopened:
                    self._fire(RESOLVED)
                await transport.authenticate()  # remote: stored token, refresh, …
                if not reopened:
                    self._fire(AUTHENTICATED)
                async with trio.open_nursery() as nursery:
                    self._live = live = Live(
                        self.spec,
                        transport,
                        nursery,
                        self._inflight,
                        self._fire,
                        capabilities=self._capabilities,
                        redactor=self._redactor,
                        server_requests=self._server_requests,
                        updated=self._subscriptions.updated,
                        log_sink=self._log_sink,
                        levels=self._lister.levels,
                        draw=self._draw,
                    )
                    live.attempt_span = self._trace
                    reopen = await self._serve(live, init, first)
            except TransportError as exc:  # authenticate: nothing to send it with
                self._failed(exc)
            finally:
                self._live = None
                self._stderr = tuple(transport.stderr_tail())
                if init.cancel_called:
                    self._failed(self._init_timeout_text())
                if not reopen:
                    self._fire(CLOSING)
        return reopen

    def _failed(self, failure: str | TransportError) -> None:
        """The attempt failed outside a live connection (connect, authenticate, init)."""
        needs_login = isinstance(failure, AuthRequired) and failure.needs_login
        reason = self._redactor.redact(str(failure))
        self._fire(Failed(reason, trio.current_time(), needs_login=needs_login, draw=self._draw()))

    def _init_timeout_text(self) -> str:
        ms = round(self.spec.init_timeout_s * 1000)
        return f"mcp server {self.name} did not finish initialize and tools/list within {ms} ms"

    async def _serve(self, live: Live, init: trio.CancelScope, first: Opening) -> bool:
        """Settle the era, list, then watch call deadlines until the connection ends
        (True: the connection closed under the probe and must be opened again)."""
        try:
            verdict = await settle(live, init, self.spec, first)  # starts it, sending ``first``
            if verdict is Verdict.REOPEN_AND_FALL_BACK or verdict is Verdict.FAIL:
                return verdict is Verdict.REOPEN_AND_FALL_BACK
            self.era = self._found = live.session.era
            live.features = ServerFeatures.of(live.session.capabilities_of_server)
            self._fire(Initialized(live.session.version or ""))
            live.listener.start()  # the per-request era's subscriptions/listen, if ours to send
            await self._lister.list(live, ALL_KINDS, self._fire)
            self._lister.set_level(live)
            self._subscriptions.connected(live)
            self._trace.ready()  # the attempt's span ends here
        except (ConnectionFailed, ProtocolError) as exc:
            live.fail(str(exc))
            return False
        init.deadline = math.inf
        # Calls flow from here on; this task watches their deadlines (one task fewer
        # per connection than a watcher of its own).
        await live.watch_deadlines()
        return False


_EFFECTS: dict[type[Effect], Callable[[ConnectionActor, Any], None]] = {
    Announce: ConnectionActor._announce,
    FailCalls: ConnectionActor._fail_calls,
    StartAttempt: ConnectionActor._give_order,
    Sleep: ConnectionActor._give_order,
    Finish: ConnectionActor._give_order,
    CancelAttempt: ConnectionActor._cancel_attempt,
    DropConnection: ConnectionActor._drop_connection,
    SendParked: ConnectionActor._send_parked,
    StartRelist: ConnectionActor._start_task,
    CheckAlive: ConnectionActor._start_task,
    ListAgain: lambda actor, effect: None,  # read by the lister that reported ``Listed``
}
"""How the actor carries out each effect."""
