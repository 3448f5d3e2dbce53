"""The Supervisor: the service an agent host embeds, and the command line runs.

``Supervisor.open`` builds it in one phase (every part made and wired before anything
runs), then runs it as nested lifetimes (pictured in ``supervisor/runtime/lifetimes.py``):
the instance lock ⊃ the store (dead instances cleaned up first) ⊃ the store actor and
audit journal ⊃ a replica's heartbeats ⊃ the router ⊃ the stdio hub ⊃ the shared
servers' connections ⊃ the warm pool ⊃ the host's sessions, ended from the inside out.

Shared servers can be added and removed while it runs (``add_server``,
``remove_server``), and ``reload`` applies a changed config file without a restart
(what changes is decided by ``supervisor.runtime.reload_plan``; it is carried out here).
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors.broadcast import Broadcast
from actors.connection.actor import ServerRequestHandler
from actors.connection.messages import Command, ConnectionStatus, Control, GetStatus, ServerListed
from actors.log_events import get_logger
from actors.mailbox import Channels, open_mailbox
from actors.router.actor import RetuneServers, RouterActor, RouterMessage
from actors.router.catalog import Catalog, ServerView
from actors.spec import Scope, ServerSpec
from actors.transports.base import Connector
from actors.transports.connector import TransportConnector
from supervisor.calls.audit_trail import AuditTrail
from supervisor.calls.requests import RequestRegistry
from supervisor.calls.services import CallServices
from supervisor.cluster.heartbeats import Heartbeats, heartbeats_running
from supervisor.cluster.replica import ReplicaIdentity, events_for, identity_for
from supervisor.runtime.connections import ConnectionFactory, SharedConnections
from supervisor.runtime.lifetimes import (
    SHUTDOWN_GRACE_S,
    instance_claimed,
    recover_dead_instances,
    router_running,
    store_opened,
    store_running,
)
from supervisor.runtime.logs import learn_secrets, log_config_warnings
from supervisor.runtime.metrics import Metrics
from supervisor.runtime.person_connections import PersonConnections
from supervisor.runtime.reload_plan import NO_FILE, ReloadPlan, ReloadRefused, plan_reload, shared_specs
from supervisor.runtime.server_memory import EraMemory, listing_to_save, read_cached_listings
from supervisor.runtime.state_dir import resolve_state_dir, state_errors
from supervisor.runtime.tracing import enable as enable_tracing
from supervisor.runtime.tracing import traces_from_environment
from supervisor.runtime.warm_pool import WarmPool
from supervisor.sessions.approvals import ApprovalDesk, Approver
from supervisor.sessions.handlers import RequestHandler, RootsSource, SessionHandlers
from supervisor.sessions.policy import Policy
from supervisor.sessions.session import Session, SessionServices, open_session
from supervisor.settings.loader import ConfigError, load_config
from supervisor.settings.model import Config
from supervisor.store import Store, StoreActor
from supervisor.store.folding import Folding, folder_settings
from supervisor.store.journal import AuditJournal
from supervisor.store.vault import StoreVault

if TYPE_CHECKING:  # the OAuth code (and httpx2) loads only when a server uses it
    from actors.auth.provider import Authorizer

__all__ = ["SHUTDOWN_GRACE_S", "Supervisor", "default_connector", "open_service", "recover_dead_instances"]
log = get_logger("supervisor")


@asynccontextmanager
async def open_service(
    config: Config,
    state_dir: str | os.PathLike[str] | None,
    kind: str,
    **more: Any,
) -> AsyncIterator[Supervisor]:
    """The supervisor of a process that is nothing else (``serve``, ``stdio``, ``bridge``): an
    instance of that ``kind``, a child subreaper, traces where ``OTEL_*`` say; ``more``: other
    options of ``Supervisor.open`` (``reread``: how ``reload`` reads the config again)."""
    with traces_from_environment():
        async with Supervisor.open(
            config, state_dir=state_dir, instance_kind=kind, subreaper=True, **more
        ) as sup:
            yield sup


@attrs.define(eq=False)
class _Running:
    """The config it runs now, and how to read it again (``reload``)."""

    config: Config
    reread: Callable[[], Config] | None = None
    lock: trio.Lock = attrs.field(factory=trio.Lock)  # one reload at a time


def default_connector(
    config: Config, state: Path | None, store: Store | None, asks: Authorizer | None, instance: str | None
) -> TransportConnector:
    """The connector of a supervisor given none (the one place it is built): local
    servers spawned as this ``instance``, remote ones with their tokens in the store's
    vault and their OAuth consent asked of ``asks`` (neither for a bridge peer)."""
    vault = StoreVault(store) if store is not None else None
    return TransportConnector(state, config.secrets, vault=vault, authorizer=asks, instance=instance)


@attrs.frozen(eq=False)
class Supervisor:
    """The running service; obtain one with ``Supervisor.open``.

    Built in one phase: every field is final. What changes while it runs changes inside
    the part that owns it: the catalog in the router, the shared servers in their
    ``SharedConnections``, pins and answers in the policy, the config in ``reload``.
    """

    _running: _Running
    instance_id: str
    """This instance's lock in the state directory."""
    state_dir: Path
    store: StoreActor
    journal: AuditJournal
    router: RouterActor
    router_mailbox: trio.MemorySendChannel[RouterMessage]
    policy: Policy
    approvals: ApprovalDesk
    events: Broadcast[Mapping[str, Any]]
    metrics: Metrics
    requests: RequestRegistry
    _shared: SharedConnections
    _sessions: SessionServices
    warm: WarmPool
    """The spare processes of ``warm: N`` servers."""
    replica: ReplicaIdentity | None = None
    """This process among replicas sharing its store (None: no ``store.url``)."""
    heartbeats: Heartbeats | None = None
    """Its heartbeat row in the shared store, while it runs (None: not a replica)."""

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
        reread: Callable[[], Config] | None = None,
    ) -> AsyncIterator[Supervisor]:
        """Run the supervisor for the duration of the ``async with`` block.

        Args:
          config: what to supervise and how (``supervisor.load_config``).
          approver: asked when a trust decision is ``ask``; without one such calls are
            denied, saying so.
          state_dir: the state directory (default: the config's, else
            ``~/.local/state/mcp-supervisor``).
          connector: how to reach a server (tests pass fakes); default: the real
            transports, with ``authorizer`` for OAuth.
          server_requests: answers servers' requests (sampling, elicitation, roots) that
            no session's handler takes (``session(sampling=...)``); shared connections
            declare ``client_capabilities`` (e.g. ``{"elicitation": {}}``).
          authorizer: gets a person's consent for a remote server's OAuth
            authorization-code flow; without one such a server waits in
            ``needs_auth`` until ``mcp-supervisor auth login`` stored its tokens.
          instance_kind: what runs, for a person reading the state directory
            (``serve``, ``stdio``, ``bridge``; an embedding host keeps ``embedded``).
          subreaper: (Linux) make this process a child subreaper while it runs, so what
            a server leaves outside its process group is killed and reaped at its
            teardown. Process-wide (every orphan below this process comes to it): an
            embedding host opts in; the command line (:func:`open_service`) always does.
            Without it, they are killed when the supervisor closes.

        Raises:
          StateError: the state directory or its database cannot be used (before the block).

        Error handling:
          An error of the block comes out in one ``ExceptionGroup``, as from a nursery,
          after everything has stopped. A part that fails (a bug: the router, the store
          actor) stops the whole supervisor the same way; one connection actor that
          crashes does not (restarted, then parked: ``supervisor.runtime.one_for_one``).
          Errors that stopping itself causes (a channel closed under a task) are removed.

        Resource handling:
          While it runs the supervisor holds an instance lock in the state directory
          (``instance_id``), the store (SQLite), the audit journal, and one connection
          (usually a process) per started server (per person for ``per_user`` ones).
          Leaving the block, also when the host is cancelled, stops its lifetimes from
          the inside out, each shielded and bounded: the host's sessions, then every
          connection (its server torn down) within twice ``SHUTDOWN_GRACE_S``, then the
          router (after folding their last messages), then the store and the journal
          (folded and deleted) within ``SHUTDOWN_GRACE_S``; last the escapees of this
          instance are killed and the lock is released.
        """
        learn_secrets(config.secrets)  # before the first line: a host's formatter may print fields
        log_config_warnings(config)
        enable_tracing()  # traces on when the otel extra is installed (supervisor/runtime/tracing.py)
        state_path = resolve_state_dir(config, state_dir)
        async with (
            instance_claimed(state_path, instance_kind, subreaper) as lock,
            store_opened(state_path, config) as store,
        ):
            await recover_dead_instances(state_path, store)
            if connector is None:
                connector = default_connector(config, state_path, store, authorizer, lock.id)
            journal = AuditJournal(state_path, lock.id)
            supervisor = cls._build(
                config, approver, state_path, store, journal, connector, server_requests, client_capabilities
            )
            supervisor._running.reread = reread
            folder = folder_settings(state_path, lock.id, config.store.url)
            supervisor.store.folding = Folding(journal, folder)
            try:
                async with (
                    store_running(supervisor.store, supervisor.journal, config.audit, supervisor.policy),
                    heartbeats_running(supervisor.heartbeats),
                    router_running(supervisor.router, supervisor.router_mailbox),
                    supervisor._shared.running(),
                    supervisor.people.running(),
                    supervisor.warm.running(),
                ):
                    log.info("supervisor started", extra={"fields": {"servers": len(config.servers)}})
                    yield supervisor
            finally:
                log.info("supervisor stopped", extra={"fields": {}})

    @classmethod
    def _build(
        cls,
        config: Config,
        approver: Approver | None,
        state_path: Path,
        store: Store,
        journal: AuditJournal,
        connector: Connector,
        server_requests: ServerRequestHandler | None,
        client_capabilities: Mapping[str, Any] | None,
    ) -> Supervisor:
        """Every part, wired; nothing runs yet."""
        store_actor = StoreActor(store)
        router_pair: Channels[RouterMessage] = open_mailbox(4096)
        router_send, router_receive = router_pair
        replica = identity_for(config)
        events = events_for(replica)  # a replica's events name it
        running = _Running(config)
        shared_specs = [spec for spec in config.servers if spec.scope is Scope.SHARED]
        with state_errors(store.path):  # the first reads find damage the open did not
            cached = read_cached_listings(store, (spec.name for spec in shared_specs))
            pins, pin_parts, approvals = store.pins(), store.pin_parts(), store.approvals()
            eras = EraMemory.load(store, store_actor.submit)
        connections = ConnectionFactory(
            connector, router_send, client_capabilities or {}, server_requests, known_era=eras.known
        )

        def save_listing(listed: ServerListed) -> None:
            store_actor.submit(listing_to_save(listed))

        people = PersonConnections.of(connections, store, lambda: running.config)
        shared = SharedConnections(people.others(shared_specs), connections)
        router = RouterActor(
            shared.registered() + people.registered(),
            router_receive,
            cached=cached,
            max_description_length=config.trust.max_description_length,
            listing_sink=save_listing,
            era_sink=eras.saw,
            events=events,
        )
        trusted = {spec.name for spec in config.servers if spec.trusted}
        policy = Policy(
            config.trust,
            trusted=trusted.__contains__,
            pins=pins,
            pin_parts=pin_parts,
            approvals=approvals,
            submit=store_actor.submit,
        )
        desk = ApprovalDesk(approver, config.trust.approval_timeout_s, events)
        metrics, requests = Metrics(), RequestRegistry()
        audit = AuditTrail(journal, None if replica is None else replica.id)
        calls = CallServices.of(config, requests, audit, metrics, events)
        private = tuple(spec for spec in config.servers if spec.scope is Scope.SESSION and spec.enabled)
        warm = WarmPool(connector, config.servers, max_processes=lambda: running.config.bridge.max_processes)
        people.cell = router.cell
        sessions = SessionServices(router.cell, router_send, connections, private, policy, desk, calls, warm)
        sessions.people = people
        return cls(
            running, journal.instance_id, state_path, store_actor, journal, router, router_send,
            policy, desk, events, metrics, requests, shared, sessions, warm, replica,
            Heartbeats.of(replica, config, events),
        )  # fmt: skip

    @property
    def config(self) -> Config:
        """The config it runs now (the one it was opened with, until a ``reload``)."""
        return self._running.config

    @property
    def calls(self) -> CallServices:
        """What its calls share: among them every call in flight by its server-assigned
        id (``in_flight``) and each server's latency ring (``latency``)."""
        return self._sessions.calls

    @property
    def people(self) -> PersonConnections:
        """Each person's own connections to ``per_user`` servers, and their sign-ins."""
        assert self._sessions.people is not None
        return self._sessions.people

    @property
    def connector(self) -> Connector:
        """How the supervisor reaches its servers."""
        return self._shared.factory.connector

    def session(
        self,
        *,
        tenant: str = "default",
        person: str | None = None,
        host_tools: int = 0,
        pinned: Iterable[str] = (),
        sampling: RequestHandler | None = None,
        elicitation: RequestHandler | None = None,
        roots: RootsSource | None = None,
        session_id: str | None = None,
    ) -> AbstractAsyncContextManager[Session]:
        """One conversation (``async with sup.session() as session``); its private
        connections end with it. Open it inside the supervisor's block.

        ``person``: who the session's calls are made for, in its audit rows, approvals
        and events (default: the tenant name). ``host_tools``: how many tools of its
        own the host shows the model (they count toward the ``tool_search``
        threshold); ``pinned``: tool ids always listed. ``sampling``, ``elicitation``
        (form and URL mode), ``roots``: this session's answers to its calls' server
        requests (``supervisor.sessions.handlers``). ``session_id``: its id (default: a new one)."""
        handlers = SessionHandlers(sampling, elicitation, roots)
        return open_session(self._sessions, tenant=tenant, person=person, host_tools=host_tools,
                            pinned=pinned, handlers=handlers, session_id=session_id)  # fmt: skip

    async def connection_status(self, server: str, timeout_s: float = 2.0) -> ConnectionStatus | None:
        """What its connection actor knows (stderr tail, calls in flight); None after ``timeout_s``."""
        mailbox = self.people.placeholder(server) or self._shared.mailbox(server)  # KeyError naming them
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

    def catalog_for(self, tenant: str | None) -> Catalog:
        """The current catalog as ``tenant`` may see it (None: the operator's view)."""
        current = self.router.cell.current
        return current if tenant is None else self._sessions.calls.exposure.view(current, tenant)

    async def command(self, server: str, control: Control) -> None:
        """Restart, enable, disable or stop one shared server."""
        await self._shared.mailbox(server).send(Command(control))

    async def add_server(self, spec: ServerSpec) -> None:
        """Supervise one more shared server while running.

        The server joins the catalog (with the tools the store last knew for its name,
        if any, listed stale until it lists its own) and its connection actor starts
        under the one-for-one supervisor, as a configured server's would. Returns once
        the catalog holds it: a turn begun after this sees it.

        Raises:
          ValueError: ``spec`` is session-scoped, or its name is supervised already.
        """
        if any(private.name == spec.name for private in self._sessions.private_servers):
            raise ValueError(f"a server named {spec.name!r} is supervised already (session-scoped)")
        cached = await self.store.read(functools.partial(read_cached_listings, servers=(spec.name,)))
        await self._shared.add(spec, cached.get(spec.name))
        await self.router.cell.wait_until(lambda catalog: spec.name in catalog.servers)

    async def remove_server(self, name: str) -> None:
        """Stop supervising a shared server while running.

        Its connection actor stops as at shutdown: calls in flight are answered
        ``unavailable``, its server torn down. Then it and its tools leave the catalog;
        returns once they have. A turn begun before still lists its tools; a call of
        one is answered ``unavailable``. The other servers are untouched.

        Raises:
          KeyError: no shared server has that name (the message names those that do).
        """
        await self._shared.remove(name)
        await self.router.cell.wait_until(lambda catalog: name not in catalog.servers)

    async def reload(self, config: Config | None = None, *, trigger: str = "host") -> ReloadPlan:
        """Apply a changed config (default: the file read again) without a restart, as
        ``plan_reload`` plans it; one log line says what happened (``trigger``: who asked).
        Raises ConfigError (malformed) or ReloadRefused (``bind``, ``state_dir``…): then
        nothing changed."""
        running = self._running
        async with running.lock:
            try:
                if config is None and running.reread is None and running.config.source is None:
                    raise NO_FILE
                if config is None:
                    config = running.reread() if running.reread else load_config(running.config.source)
                plan = plan_reload(running.config, config)
            except (ConfigError, ReloadRefused) as exc:
                log.warning(
                    "config reload refused", extra={"fields": {"trigger": trigger, "reason": str(exc)}}
                )
                raise
            learn_secrets(config.secrets)
            log_config_warnings(config)
            self.policy.retune(config.trust, {s.name for s in config.servers if s.trusted}.__contains__)
            self.approvals.timeout_s = config.trust.approval_timeout_s
            epoch = self.router.cell.current.epoch + 1  # new exposure lists apply from it
            refresh = self._sessions.calls.retune(config, epoch)
            self._sessions.private_servers = plan.private
            await self.warm.retune(config.servers)  # spares of changed or removed servers stop
            for name in (*plan.stop, *(spec.name for spec in plan.restart)):
                await self.remove_server(name)
            for spec in (*plan.restart, *plan.start):
                await self.add_server(spec)
            for spec in plan.retune:
                await self._shared.retune(spec)
            kept = shared_specs(config)  # every running shared server takes its new spec
            await self.router_mailbox.send(RetuneServers(kept, config.trust.max_description_length, refresh))
            await self.router.cell.wait_until(
                lambda c: all(c.servers[s.name].spec is s for s in kept) and (not refresh or c.epoch >= epoch)
            )
            running.config = config
            log.info("config reloaded", extra={"fields": {"trigger": trigger, **plan.summary()}})
            return plan
