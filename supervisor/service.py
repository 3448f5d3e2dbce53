"""The Supervisor: the root nursery, the store, the router, one connection actor per server.

``Supervisor.open`` takes this instance's lock in the state directory (several
instances may share one: see ``actors/transports/instances.py``), opens the store
(last-known tool lists, pins, remembered approvals), cleans up after dead instances
(their orphaned servers; their audit journals, folded into the store), starts the store
actor, the audit journal, the router, then the connection actors in config order under
a one-for-one supervisor, and yields. Leaving the context stops everything in reverse:
sessions first (they are nested inside), then connections (each tears its server down:
stdin closed, SIGTERM, SIGKILL, reaped), then the router, then the store (its queue
written), then the journal (deleted once SQLite holds every row), and last releases
the lock. Teardown runs shielded under a deadline, also when the host is cancelled.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from actors.broadcast import Broadcast
from actors.connection.actor import ServerRequestHandler
from actors.connection.messages import Command, ConnectionMessage, ConnectionStatus, Control, GetStatus
from actors.connection.spec import Scope
from actors.mailbox import Channels, open_mailbox
from actors.protocol.codec import structure_tool, tool_to_wire
from actors.protocol.errors import ProtocolError
from actors.protocol.messages import Tool
from actors.router.actor import RouterActor, RouterMessage
from actors.router.catalog import ServerView
from actors.transports.base import Connector
from actors.transports.escapees import acquire_subreaper, kill_marked, release_subreaper, sweep_instance
from actors.transports.instances import claim_dead_instances
from actors.transports.pidfiles import reap_orphans
from actors.transports.select import TransportConnector
from supervisor.approvals import ApprovalDesk, Approver
from supervisor.audit_trail import AuditTrail
from supervisor.connections import ConnectionFactory, shared_child
from supervisor.memory_trim import trim_memory_periodically
from supervisor.metrics import Metrics
from supervisor.one_for_one import OneForOne
from supervisor.policy import Policy
from supervisor.requests import RequestRegistry
from supervisor.sessions import Session, SessionServices, open_session
from supervisor.settings.model import Config
from supervisor.state_dir import lock_instance, open_store, resolve_state_dir, state_errors
from supervisor.store.vault import StoreVault
from supervisor.turns import CallServices

if TYPE_CHECKING:  # the OAuth code (and httpx2) loads only when a server uses it
    from actors.auth.provider import Authorizer
from supervisor.store import SaveToolList, Store, StoreActor
from supervisor.store.journal import AuditJournal
from supervisor.store.replay import fold_journal, recover_audit_journals

log = logging.getLogger("supervisor")

SHUTDOWN_GRACE_S = 10.0


def open_service(
    config: Config, state_dir: str | os.PathLike[str] | None, kind: str
) -> AbstractAsyncContextManager[Supervisor]:
    """The supervisor of a process that is nothing else (``serve``, ``stdio``, ``bridge``):
    an instance of that ``kind``, and a child subreaper (the process owns its children)."""
    return Supervisor.open(config, state_dir=state_dir, instance_kind=kind, subreaper=True)


async def recover_dead_instances(state_path: Path, store: Store | None = None) -> None:
    """Clean up after the supervisor instances of this state directory that died
    (SIGKILL, OOM, a power cut): kill the servers they left running and, given the
    ``store``, fold their audit journals into it (``supervisor.store.replay``).

    One claim covers every recovery, so two instances starting at once never recover
    the same dead one, and one whose recovery failed is tried again by the next start
    (``done()`` only after everything succeeded).
    """
    with claim_dead_instances(state_path) as dead:
        ids = {d.id for d in dead}
        reaped = await trio.to_thread.run_sync(reap_orphans, state_path, ids)
        # Their servers' escapees too (a daemon that left the server's group), found
        # anywhere by the marker naming a dead instance.
        reaped += await trio.to_thread.run_sync(kill_marked, ids)
        if reaped:
            log.warning("cleaned up orphans", extra={"fields": {"pids": ",".join(map(str, reaped))}})
        recovered = dead
        if store is not None:  # a journal that cannot be folded now keeps its claim open
            recovered = await trio.to_thread.run_sync(recover_audit_journals, store, state_path, dead)
        for instance in recovered:
            instance.done()


def default_connector(
    config: Config, state_path: Path, store: Store, authorizer: Authorizer | None, instance: str
) -> TransportConnector:
    """The connector of a supervisor given none (the one place it is built): local
    servers spawned as this ``instance``, remote ones with their tokens in the store's
    vault and their OAuth consent asked of ``authorizer``."""
    return TransportConnector(
        state_path, config.secrets, vault=StoreVault(store), authorizer=authorizer, instance=instance
    )


def _cached_tools(store: Store, servers: Iterable[str]) -> dict[str, tuple[Tool, ...]]:
    """Last-known tool lists of configured servers (unreadable entries skipped)."""
    wanted = set(servers)
    cached: dict[str, tuple[Tool, ...]] = {}
    for server, (tools, _listed_at) in store.tool_lists().items():
        if server not in wanted:
            continue
        parsed = []
        for wire in tools:
            try:
                parsed.append(structure_tool(wire))
            except ProtocolError:
                continue
        cached[server] = tuple(parsed)
    return cached


class Supervisor:
    """The running service; obtain one with ``Supervisor.open``."""

    def __init__(
        self,
        config: Config,
        router: RouterActor,
        router_mailbox: trio.MemorySendChannel[RouterMessage],
        connections: ConnectionFactory,
        state_dir: Path,
        store: StoreActor,
        policy: Policy,
        approvals: ApprovalDesk,
        events: Broadcast[Mapping[str, Any]],
        journal: AuditJournal,
        mailboxes: Mapping[str, trio.MemorySendChannel[ConnectionMessage]],
    ) -> None:
        self.config = config
        self.journal = journal
        self.router = router
        self.router_mailbox = router_mailbox
        self.connector = connections.connector
        self.state_dir = state_dir
        self.store = store
        self.policy = policy
        self.approvals = approvals
        self.events = events
        self.metrics = Metrics()
        self.requests = RequestRegistry()
        self.server_requests = connections.server_requests
        self.client_capabilities = connections.client_capabilities
        self._mailboxes = dict(mailboxes)
        self.instance_id: str = journal.instance_id  # this instance's lock in the state directory
        calls = CallServices(
            config.tool_search, self.requests, AuditTrail(journal, store), self.metrics, events
        )
        private = tuple(spec for spec in config.servers if spec.scope is Scope.SESSION and spec.enabled)
        self._sessions = SessionServices(
            router.cell, router_mailbox, connections, private, policy, approvals, calls
        )

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        config: Config,
        approver: Approver | None = None,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        connector: Connector | None = None,
        server_requests: ServerRequestHandler | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
        authorizer: Authorizer | None = None,
        instance_kind: str = "embedded",
        subreaper: bool = False,
    ) -> AsyncIterator[Supervisor]:
        """Run the supervisor for the duration of the ``async with`` block.

        ``server_requests`` answers requests from servers (sampling, elicitation,
        roots); declare what it handles in ``client_capabilities`` (e.g.
        ``{"elicitation": {}}``). Without one, such requests get method-not-found.
        ``authorizer`` gets a person's consent for a remote server's OAuth
        authorization-code flow; without one such a server waits in ``needs_auth``
        until ``mcp-supervisor auth login`` stored its tokens.

        The supervisor holds an instance lock in the state directory for as long as it
        runs (``instance_id``); ``instance_kind`` says what runs, for a person reading
        the directory (``serve``, ``stdio``, ``bridge``; an embedding host keeps
        ``embedded``).

        ``subreaper=True`` (Linux) makes this process a child subreaper while the
        supervisor runs, so processes a server leaves outside its process group are
        killed and reaped at that server's teardown. The setting is process-wide (every
        orphan below this process comes to it), so an embedding host opts in; the
        command line (:func:`open_service`) always does. Without it, they are killed
        when the supervisor closes.

        Raises ``StateError`` when the state directory or its database cannot be used.
        """
        for warning in config.warnings:
            fields = {"file": warning.file, "path": warning.json_path, "problem": warning.problem}
            log.warning("config warning", extra={"fields": fields})
        state_path = resolve_state_dir(config, state_dir)
        lock = lock_instance(state_path, instance_kind)
        subreaping = subreaper and acquire_subreaper()
        try:
            store = await trio.to_thread.run_sync(open_store, state_path)
            try:
                await recover_dead_instances(state_path, store)
                journal = AuditJournal(state_path, lock.id)
                if connector is None:
                    connector = default_connector(config, state_path, store, authorizer, lock.id)
                async with cls._running(
                    config,
                    approver,
                    state_path,
                    store,
                    connector,
                    server_requests,
                    client_capabilities,
                    journal,
                ) as supervisor:
                    yield supervisor
            finally:
                store.close()
        finally:
            try:
                await sweep_instance(lock.id)  # escapees no server teardown caught
            finally:
                if subreaping:
                    release_subreaper()
                lock.release()  # last: until here, our servers' pidfiles are ours alone

    @classmethod
    @asynccontextmanager
    async def _running(
        cls,
        config: Config,
        approver: Approver | None,
        state_path: Path,
        store: Store,
        connector: Connector,
        server_requests: ServerRequestHandler | None,
        client_capabilities: Mapping[str, Any] | None,
        journal: AuditJournal,
    ) -> AsyncIterator[Supervisor]:
        shared = [spec for spec in config.servers if spec.scope is Scope.SHARED]
        store_actor = StoreActor(store)

        async def fold(paths: list[Path]) -> None:
            await store_actor.read(functools.partial(fold_journal, paths=paths, interrupted=False))

        async def fold_all(paths: list[Path]) -> None:
            await store_actor.read(functools.partial(fold_journal, paths=paths, interrupted=True))

        mailboxes: dict[str, Channels[ConnectionMessage]] = {spec.name: open_mailbox() for spec in shared}
        router_pair: Channels[RouterMessage] = open_mailbox(4096)
        router_send, router_receive = router_pair

        def save_tool_list(server: str, tools: tuple[Tool, ...]) -> None:
            store_actor.submit(SaveToolList(server, [tool_to_wire(t) for t in tools], time.time()))

        events: Broadcast[Mapping[str, Any]] = Broadcast()
        with state_errors(store.path):  # the first reads find damage the open did not
            cached_tools = _cached_tools(store, (spec.name for spec in shared))
            pins, approvals = store.pins(), store.approvals()
        router = RouterActor(
            [(spec, mailboxes[spec.name][0]) for spec in shared],
            router_receive,
            cached_tools=cached_tools,
            max_description_length=config.trust.max_description_length,
            tool_list_sink=save_tool_list,
            events=events,
        )
        trusted = {spec.name for spec in config.servers if spec.trusted}
        policy = Policy(
            config.trust,
            trusted=trusted.__contains__,
            pins=pins,
            approvals=approvals,
            submit=store_actor.submit,
        )
        desk = ApprovalDesk(approver, config.trust.approval_timeout_s, events)
        factory = ConnectionFactory(connector, router_send, client_capabilities or {}, server_requests)
        tree = OneForOne()
        async with trio.open_nursery() as nursery:
            if isinstance(connector, TransportConnector):  # one task for every local server's stderr and exit
                await nursery.start(connector.run)
            await nursery.start(trim_memory_periodically)
            await nursery.start(store_actor.run)
            await nursery.start(journal.run, fold)
            await nursery.start(router.run)
            supervisor = cls(
                config,
                router,
                router_send,
                factory,
                state_path,
                store_actor,
                policy,
                desk,
                events,
                journal,
                {name: pair[0] for name, pair in mailboxes.items()},
            )
            children = [shared_child(spec, mailboxes[spec.name], factory) for spec in shared]
            await nursery.start(tree.run, children)
            log.info("supervisor started", extra={"fields": {"servers": len(config.servers)}})
            try:
                yield supervisor
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(SHUTDOWN_GRACE_S * 2):
                    await tree.stop()
                    router_send.close()
                    await store_actor.aclose()
                    await journal.aclose(fold_all)
                nursery.cancel_scope.cancel()
                log.info("supervisor stopped", extra={"fields": {}})

    @asynccontextmanager
    async def session(
        self, *, tenant: str = "default", host_tools: int = 0, pinned: Iterable[str] = ()
    ) -> AsyncIterator[Session]:
        """One conversation; its private connections end with it.

        ``host_tools``: how many tools of its own the host shows the model (they count
        toward the ``tool_search`` threshold); ``pinned``: tool ids always listed.
        """
        async with open_session(
            self._sessions, SHUTDOWN_GRACE_S, tenant=tenant, host_tools=host_tools, pinned=pinned
        ) as session:
            yield session

    async def connection_status(self, server: str, timeout_s: float = 2.0) -> ConnectionStatus | None:
        """What the server's connection actor alone knows (stderr tail, calls in flight);
        None when it does not answer within ``timeout_s``."""
        mailbox = self._mailboxes[server]
        reply, answers = trio.open_memory_channel[ConnectionStatus](1)
        with trio.move_on_after(timeout_s):
            try:
                await mailbox.send(GetStatus(reply))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            return await answers.receive()
        return None

    def servers(self) -> Mapping[str, ServerView]:
        """The shared servers as the router sees them now."""
        return self.router.cell.current.servers

    async def command(self, server: str, control: Control) -> None:
        """Restart, enable, disable or stop one shared server."""
        try:
            mailbox = self._mailboxes[server]
        except KeyError:
            raise KeyError(f"no server named {server!r}; known: {', '.join(self._mailboxes)}") from None
        await mailbox.send(Command(control))
