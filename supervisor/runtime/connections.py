"""The supervisor's connection actors: how they are built, and the shared ones' lifetime.

``ConnectionFactory`` holds what every connection actor of one supervisor is given
(the connector, the router's mailbox, the host's client capabilities and its
handler of server requests), so a session starts its private servers with the same
parts as the supervisor its shared ones, without seeing the supervisor.

``SharedConnections`` runs the shared servers: each one a child of a one-for-one
supervisor (``supervisor.runtime.one_for_one``) with a mailbox of its own that outlives its
restarts. Its lifetime holds the stdio hub (the connector's one task for every local
server's exits), and inside it the children, stopped in reverse when it ends (each
tears its server down: stdin closed, SIGTERM, SIGKILL, reaped). Servers join and
leave while it runs (``add``, ``remove``); the router learns of each.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from actors.broadcast import Broadcast
from actors.connection import retry
from actors.connection.actor import ConnectionActor, Crashed, ServerRequestHandler
from actors.connection.client_side import ClientSide
from actors.connection.messages import (
    CallTool,
    Command,
    ConnectionMessage,
    Control,
    Retune,
    ServerListed,
    unavailable,
)
from actors.connection.retry import Draw
from actors.connection.schedule import jittered
from actors.connection.server_log import LogSink, ServerLogged
from actors.connection.server_requests import chain
from actors.mailbox import Channels, answer, open_mailbox, queued, try_send
from actors.protocol.era import Era
from actors.router.actor import AddServer, RemoveServer, RouterMessage
from actors.spec import Credentials, Scope, ServerSpec
from actors.transports.base import Connector
from actors.transports.connector import TransportConnector
from supervisor.runtime.lifetimes import SHUTDOWN_GRACE_S, lifetime
from supervisor.runtime.log_wants import LogWants
from supervisor.runtime.one_for_one import ChildSpec, OneForOne, Startable


@attrs.frozen(slots=True, eq=False)
class ConnectionFactory:
    """Builds the connection actors of one supervisor."""

    connector: Connector
    router: trio.MemorySendChannel[RouterMessage]
    client_capabilities: dict[str, Any] = attrs.field(factory=dict, converter=dict)
    """The host's, copied once; every actor reads this one dict (they never change it)."""
    server_requests: ServerRequestHandler | None = None
    known_era: Callable[[str], Era | None] = lambda _server: None
    """The era a shared server was last found to speak (``supervisor.runtime.server_memory``)."""
    server_logs: Broadcast[ServerLogged] = attrs.field(factory=Broadcast)
    """Every server's log messages its sessions' clients want, tied to no call (a
    gateway passes them on to its clients)."""
    log_wants: LogWants = attrs.field(factory=LogWants)
    """The level the sessions' clients want of the shared servers (``log_wants.py``)."""
    draw: Draw = retry.draw
    """Where each retry falls within a reconnect schedule's jitter (tests seed it)."""

    def actor(
        self,
        spec: ServerSpec,
        mailbox: trio.MemoryReceiveChannel[ConnectionMessage],
        *,
        owner: str | None = None,
        restart: bool = True,
        crashed: Crashed | None = None,
        client: ClientSide | None = None,
        connector: Connector | None = None,
        wanted_logs: str | None = None,
    ) -> ConnectionActor:
        """A connection actor for ``spec`` that reads ``mailbox`` and publishes to the
        router (a private one: ``owner`` is its session, and it is never restarted;
        ``client`` is that session's side: its connection declares the session's
        capabilities, and the session's handler answers requests tied to no call
        first; ``wanted_logs``: the log level its clients want; ``connector``: another
        than the supervisor's, e.g. one that adopts a warm spare)."""
        capabilities, handler = self.client_capabilities, self.server_requests
        if client is not None:
            capabilities, handler = dict(client.capabilities), chain(client.handler, handler)
        return ConnectionActor(
            spec,
            connector or self.connector,
            mailbox,
            self.router.clone(),
            owner=owner,
            restart=restart,
            client_capabilities=capabilities,
            server_requests=handler,
            crashed=crashed,
            known_era=self.known_era(spec.name) if owner is None else None,
            log_sink=self._log_sink(owner),
            wanted_logs=self.log_wants.level if owner is None else wanted_logs,
            draw=self.draw,
        )

    def _log_sink(self, owner: str | None) -> LogSink:
        publish = self.server_logs.publish
        if owner is None:
            return publish
        return lambda record: publish(attrs.evolve(record, owner=owner))


async def run_actor(nursery: trio.Nursery, actor: ConnectionActor, done: trio.Event) -> None:
    """Start a private (or a person's) actor in ``nursery``, returning once it runs;
    ``done`` is set when it ends."""

    async def run(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await actor.run(task_status=task_status)
        finally:
            done.set()

    await nursery.start(run)


def shared_child(
    current: Callable[[], ServerSpec], mailbox: Channels[ConnectionMessage], factory: ConnectionFactory
) -> ChildSpec:
    """One shared server as a child of the one-for-one supervisor; ``current`` gives
    its spec now (a reload may retune it: its restarts use the new spec)."""
    send, receive = mailbox
    name = current().name

    def start(crashed: Crashed | None = None) -> Startable:
        # A fresh actor per (re)start; the mailbox outlives it so senders keep working.
        return factory.actor(current(), receive, crashed=crashed).run

    def park_s() -> float:
        # A bug of ours fails this server only: it waits in backoff (condition
        # "crashed") and tries again at its schedule's last delay (jittered), forever.
        spec = current()
        return jittered(spec.reconnect_schedule_s[-1], spec.reconnect_jitter, factory.draw())

    def park(crash: Exception, delay: float) -> Startable:
        what = f"{type(crash).__name__}: {crash}"[:200]
        reason = (
            f"mcp server {name}: its connection actor crashed ({what}); next try in "
            f"{delay:.3g} s (a bug in mcp-supervisor: please report it with the log)"
        )
        return start(Crashed(reason, delay))

    def request_stop() -> bool:
        return try_send(send, Command(Control.STOP))

    return ChildSpec(name, start, request_stop, park=park, park_s=park_s)


def _refuse_queued(mailbox: trio.MemoryReceiveChannel[ConnectionMessage], name: str) -> None:
    """After an actor was cancelled (it did not stop in time): answer the calls still
    queued for it, and close its mailbox so later senders fail fast."""
    for message in queued(mailbox):
        if isinstance(message, CallTool):
            answer(message.reply, unavailable(name))
    mailbox.close()


class SharedConnections:
    """The shared servers' connection actors; see the module docstring."""

    def __init__(self, specs: Iterable[ServerSpec], factory: ConnectionFactory) -> None:
        self.factory = factory
        self._initial = tuple(specs)
        self._mailboxes: dict[str, Channels[ConnectionMessage]] = {
            spec.name: open_mailbox() for spec in self._initial
        }
        self._specs = {spec.name: spec for spec in self._initial}  # current: a reload retunes
        self._tree = OneForOne(dynamic=True, stop_timeout_s=SHUTDOWN_GRACE_S)
        self._changing = trio.Lock()  # one add or remove at a time
        factory.log_wants.bind(lambda: [send for send, _ in self._mailboxes.values()])

    def registered(self) -> list[tuple[ServerSpec, trio.MemorySendChannel[ConnectionMessage]]]:
        """The servers to start with, and their mailboxes (for the router's first catalog)."""
        return [(spec, self._mailboxes[spec.name][0]) for spec in self._initial]

    def mailbox(self, name: str) -> trio.MemorySendChannel[ConnectionMessage]:
        """The mailbox of a shared server's connection actor."""
        try:
            return self._mailboxes[name][0]
        except KeyError:
            raise KeyError(f"no server named {name!r}; known: {', '.join(self._mailboxes)}") from None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the stdio hub, and inside it every shared server's actor, for the block;
        see ``Supervisor.open`` for what ending it does."""
        connector = self.factory.connector
        async with lifetime() as hub:  # outlives every connection: they report exits to it
            if isinstance(connector, TransportConnector):
                await hub.start(connector.run)
            async with lifetime(self._tree.stop, grace_s=2 * SHUTDOWN_GRACE_S, transparent=False) as children:
                initial = [self._child(spec.name, self._mailboxes[spec.name]) for spec in self._initial]
                await children.start(self._tree.run, initial)
                yield

    async def add(self, spec: ServerSpec, cached: ServerListed | None = None) -> None:
        """Register a shared server with the router, then start its actor (returns once
        it runs: an eager server starts connecting, a lazy one waits to be needed)."""
        if spec.scope is not Scope.SHARED:
            raise ValueError(f"server {spec.name!r} is session-scoped: each session runs its own")
        if spec.credentials is Credentials.PER_USER:
            raise ValueError(f"server {spec.name!r} is per_user: put it in the config and restart")
        async with self._changing:
            if spec.name in self._mailboxes:
                raise ValueError(f"a server named {spec.name!r} is supervised already")
            pair: Channels[ConnectionMessage] = open_mailbox()
            self._mailboxes[spec.name] = pair
            self._specs[spec.name] = spec
            try:
                await self.factory.router.send(AddServer(spec, pair[0], cached))
                await self._tree.start_child(self._child(spec.name, pair))
            except BaseException:
                del self._mailboxes[spec.name], self._specs[spec.name]
                try_send(self.factory.router, RemoveServer(spec.name))
                raise

    async def remove(self, name: str) -> None:
        """Stop a shared server's actor (its calls answered at once, its server torn
        down), then take it out of the router's catalog."""
        async with self._changing:
            self.mailbox(name)  # KeyError naming the known ones
            await self._tree.stop_child(name)
            _send, receive = self._mailboxes.pop(name)
            del self._specs[name]
            _refuse_queued(receive, name)
            await self.factory.router.send(RemoveServer(name))

    async def retune(self, spec: ServerSpec) -> None:
        """A reload changed settings of a running shared server that need no new
        connection: its actor takes ``spec`` now, its restarts use it, and an
        ``enabled`` change enables or disables it as the operator's command would."""
        async with self._changing:
            before = self._specs[spec.name]
            self._specs[spec.name] = spec
            mailbox = self.mailbox(spec.name)
            await mailbox.send(Retune(spec))
            if spec.enabled != before.enabled:
                await mailbox.send(Command(Control.ENABLE if spec.enabled else Control.DISABLE))

    def _child(self, name: str, mailbox: Channels[ConnectionMessage]) -> ChildSpec:
        return shared_child(lambda: self._specs[name], mailbox, self.factory)
