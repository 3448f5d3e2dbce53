"""Sessions: one conversation of an agent host.

A ``Session`` owns a nursery for its private (``scope: session``) connections, which
end with it; it remembers which tools ``tool_search`` activated and which approvals
were given "for the session", and its resource subscriptions
(``supervisor/sessions/subscriptions.py``). ``begin_turn`` freezes the current catalog
epoch, as its tenant may see it (``view_of``), into a ``Turn`` (supervisor/calls/turns.py).

A session never sees the supervisor: it is given ``SessionServices``, what it may
use of it, built once by ``Supervisor.open``. Imports go one way, service →
sessions → turns.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager, nullcontext, suppress
from typing import Any

import attrs
import trio

from actors.broadcast import Broadcast
from actors.connection.log_levels import LogDemand
from actors.connection.messages import (
    CallOutcome,
    Command,
    ConnectionMessage,
    Control,
    EnsureStarted,
    WantLogs,
)
from actors.connection.server_log import ServerLogged
from actors.connection.states import is_settled, needs_start
from actors.log_events import get_logger
from actors.mailbox import Channels, open_mailbox, try_send
from actors.router.actor import CatalogCell, DropOwner, RegisterServer, RouterMessage
from actors.router.catalog import Catalog, ServerView, ToolEntry
from actors.router.envelope import Envelope
from actors.router.trust import Action, Decision, permission_of
from actors.spec import Credentials, ServerSpec
from supervisor.calls.services import Authorization, CallServices, calling_client
from supervisor.calls.turns import Turn
from supervisor.runtime.connections import ConnectionFactory, run_actor
from supervisor.runtime.lifetimes import lifetime
from supervisor.runtime.person_connections import PersonConnections, person_owner
from supervisor.runtime.sign_ins import SignIn, SignIns
from supervisor.runtime.tracing import TRACING
from supervisor.runtime.warm_pool import WarmPool
from supervisor.sessions.approvals import ApprovalDesk, ApprovalRequest
from supervisor.sessions.handlers import SessionHandlers
from supervisor.sessions.policy import Policy
from supervisor.sessions.subscriptions import ResourceUpdate, Subscriptions
from supervisor.sessions.trust_prompts import approver_for

log = get_logger("supervisor.sessions")
PER_USER = Credentials.PER_USER


def _settled(view: ServerView) -> bool:
    """Done starting: serving, or down (a turn stops waiting for it either way)."""
    return is_settled(view.state, view.phase)


@attrs.define(slots=True, eq=False)
class SessionServices:
    """What a session may use of the supervisor that runs it (built once, with it)."""

    catalog: CatalogCell
    """The router's current catalog (shared servers, and each session's private ones)."""
    router: trio.MemorySendChannel[RouterMessage]
    """To register the session's private servers and to forget them at its end."""
    connections: ConnectionFactory
    private_servers: tuple[ServerSpec, ...]
    """The enabled ``scope: session`` servers: each session runs its own (replaced by a
    config reload, ``Supervisor.reload``, for the sessions opened after it)."""
    policy: Policy
    approvals: ApprovalDesk
    calls: CallServices
    warm: WarmPool | None = None
    """Spare processes of ``warm: N`` servers: a private connection adopts one."""
    people: PersonConnections | None = None
    """Each person's own connections to ``per_user`` servers."""


@asynccontextmanager
async def open_session(
    services: SessionServices,
    *,
    tenant: str = "default",
    person: str | None = None,
    host_tools: int = 0,
    pinned: Iterable[str] = (),
    handlers: SessionHandlers | None = None,
    session_id: str | None = None,
) -> AsyncIterator[Session]:
    """The lifetime of a session: see ``Session`` (``session_id``: its id, default a new one)."""
    if person is not None and (not isinstance(person, str) or not person.strip()):
        raise ValueError(
            f"person must be a non-empty str (who the session's calls are for), not {person!r};"
            " leave it out to use the tenant name"
        )
    session: Session | None = None

    async def stop() -> None:
        if session is not None:
            await session._subscriptions.close()
            await services.connections.log_wants.want(session.id, None)
            await session._stop_private()

    people = services.people
    held = people.held(tenant if person is None else person) if people is not None else nullcontext()
    try:
        async with held, lifetime(stop, transparent=False) as nursery:
            session = Session(
                services,
                nursery,
                tenant=tenant,
                person=person,
                host_tools=host_tools,
                pinned=pinned,
                handlers=handlers,
                session_id=session_id,
            )
            yield session
    finally:
        if session is not None:  # the router forgets its private servers
            try_send(services.router, DropOwner(session.id))


class Session:
    """One conversation; owns its private connections, activations and approvals.

    Obtain one with ``Supervisor.session()`` (an ``async with``), inside the
    supervisor's block.

    Error handling:
      An error of the block comes out in one ``ExceptionGroup``, as from a nursery,
      after the private connections have stopped. A private connection that fails
      makes its server unavailable in this session, never an error of the block.

    Resource handling:
      Its ``scope: session`` servers start at its first turn and run in a nursery of
      its own, so they end with it: leaving the block, also when the host is
      cancelled, stops each (its server torn down: stdin closed, SIGTERM, SIGKILL,
      reaped) within ``SHUTDOWN_GRACE_S``, shielded, then cancels what is left, and the
      router forgets them. Activations and "for the session" approvals live in memory
      and go with it.
    """

    def __init__(
        self,
        services: SessionServices,
        nursery: trio.Nursery,
        *,
        tenant: str = "default",
        person: str | None = None,
        host_tools: int = 0,
        pinned: Iterable[str] = (),
        handlers: SessionHandlers | None = None,
        session_id: str | None = None,
    ) -> None:
        self.id = session_id if session_id is not None else secrets.token_hex(8)
        # Who answers the server requests of its calls, and what they declare.
        self.client = (handlers or SessionHandlers()).client_side(
            self.id, services.connections.client_capabilities
        )
        self._services = services
        self.tenant = tenant
        # Who its calls are made for (its audit rows, approvals, events): the host says,
        # else the tenant name, a static-token caller's person (docs/identity.md).
        self.person = tenant if person is None else person
        self._person_key = person_owner(self.person)  # its person's connections' overlay
        self.host_tools = host_tools
        self.pinned = tuple(pinned)
        # tool id → its activation's number; pinned tools are activated from the start
        self.activated: dict[str, int] = {tool: n for n, tool in enumerate(dict.fromkeys(self.pinned))}
        self.memory: dict[tuple[str, str], Action] = {}
        self._nursery = nursery
        self._turns = itertools.count(1)
        self._private: dict[str, tuple[trio.MemorySendChannel[ConnectionMessage], trio.Event]] = {}
        # Answered reply channels, reused by the next calls (see ``Turn._call``).
        self.replies: list[Channels[CallOutcome]] = []
        # A per-epoch cache that keeps begin_turn O(1) over a settled catalog
        # (catalogs are immutable: identity is the key).
        self._starting: tuple[Catalog | None, tuple[ServerView, ...]] = (None, ())
        self._subscriptions = Subscriptions(self.id, nursery)
        self._logs = LogDemand()  # the server log levels its clients want (``want_logs``)
        self._telling_logs = trio.Lock()  # one change told at a time: the last told is current
        self.runs_private = True
        """Whether its turns start its ``scope: session`` servers (the MCP gateway's
        per-tenant state of new-era clients does not: they need a handshake-era session)."""
        self.prompts_client = True
        """Whether an ``ask`` may be put to the calling client (``trust_prompts.py``). Not
        in the gateway's per-tenant state of new-era clients: shared by all of a
        tenant's clients, its "for the session" would allow for every one of them."""

    # ------------------------------------------------------------ subscriptions

    @property
    def resource_updates(self) -> trio.MemoryReceiveChannel[ResourceUpdate]:
        """Updates of the resources this session subscribed to (``subscribe``); ends
        when the session does."""
        return self._subscriptions.updates

    async def subscribe(self, uri: str, server: str | None = None) -> Envelope:
        """Subscribe to a resource (``uri`` as shown, qualified, or the server's own
        with ``server``): its updates come on ``resource_updates``. One envelope:
        ``unknown_resource``, ``unsupported`` (the server offers no subscriptions),
        ``unavailable``; the session leaves its subscriptions when it ends."""
        return await self._subscriptions.subscribe(self._current(), uri, server)

    async def unsubscribe(self, uri: str, server: str | None = None) -> Envelope:
        """Leave a subscription (ok also when there was none)."""
        return await self._subscriptions.unsubscribe(self._current(), uri, server)

    # ------------------------------------------------------------------- turns

    async def begin_turn(self) -> Turn:
        """Start a turn: start the lazy servers it needs, then freeze the catalog.

        A server whose tools are unknown (never listed, nothing cached) is started so
        its tools can be counted and found; with search off every lazy server is
        started, as the turn lists all tools. Each wait is bounded by the server's
        ``init_timeout``; one that is not up by then is unavailable in this turn.
        """
        await self._spawn_private_servers()
        if self._services.people is not None:
            await self._services.people.ensure(self.person)
        catalog = self._current()
        # A per_user server's connection of this person is waited for too: until it serves
        # or waits for its person's sign-in (then a call of it is needs_auth at once).
        await self._start_and_wait(catalog, lambda view: not view.known or view.spec.credentials is PER_USER)
        catalog = self._current()
        search = self.search_enabled(catalog)
        if not search:
            await self._start_and_wait(catalog, lambda view: True)
            catalog = self._current()
        return Turn(self, self._services.calls, f"{self.id}-{next(self._turns)}", catalog, search)

    def search_enabled(self, catalog: Catalog) -> bool:
        """``tool_search`` on or off for a turn over ``catalog``."""
        settings = self._services.calls.tool_search
        if settings.enabled == "auto":
            return len(catalog.tools) + self.host_tools > settings.threshold
        return bool(settings.enabled)

    def activate(self, tool_id: str) -> None:
        """Make a tool part of every later listing in this session."""
        self.activated.setdefault(tool_id, len(self.activated))

    @property
    def server_logs(self) -> Broadcast[ServerLogged]:
        """Every server's log messages tied to no call that some session's clients want,
        or that enter our log (a private one's carry its session as ``owner``)."""
        return self._services.connections.server_logs

    async def want_logs(self, level: str | None, who: str = "client") -> None:
        """``who`` of this session's clients wants its servers' log messages at ``level``
        and above from now on (None: none). The most verbose level its clients want is
        told to its private servers, and counts toward what the shared ones are asked
        for (``supervisor/runtime/log_wants.py``). Returns once they were told."""
        async with self._telling_logs:
            if not self._logs.want(who, level):
                return
            wanted = self._logs.level
            await self._services.connections.log_wants.want(self.id, wanted)
            for send, _done in list(self._private.values()):
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await send.send(WantLogs(wanted))

    def preview_turn(self) -> Turn:
        """A turn over the current epoch, to see what a listing would show now (no
        server is started; make calls in turns from ``begin_turn``)."""
        catalog = self._current()
        return Turn(self, self._services.calls, f"{self.id}-preview", catalog, self.search_enabled(catalog))

    def denied_outright(self, entry: ToolEntry) -> bool:
        """A trust rule denies every call of the tool (pattern ``*``): it is not shown."""
        return bool(entry.server) and self._services.policy.denied_outright(entry)

    def catalog_now(self) -> Catalog:
        """The current epoch as this session sees it (no turn is begun)."""
        return self._current()

    def view_of(self, catalog: Catalog) -> Catalog:
        """``catalog`` as this session sees it: its private servers added, and what the
        ``exposure`` lists hide from its tenant taken out (``supervisor/calls/exposure.py``)."""
        return self._services.calls.exposure.view(catalog.view_for(self._person_key, self.id), self.tenant)

    def _current(self) -> Catalog:
        return self.view_of(self._services.catalog.current)

    async def _start_and_wait(self, catalog: Catalog, wanted: Callable[[ServerView], bool]) -> None:
        """Start the wanted idle servers; wait (bounded) until every wanted one settled."""
        cached, starting = self._starting
        if cached is not catalog:
            starting = tuple(v for v in catalog.servers.values() if v.spec.enabled and not _settled(v))
            self._starting = (catalog, starting)
        if not starting:
            return
        waiting = {v.name for v in starting if wanted(v)}
        for name in waiting:
            view = catalog.servers[name]
            if needs_start(view.state):
                try:
                    await view.mailbox.send(EnsureStarted())
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    continue
        if not waiting:
            return
        limit = max(catalog.servers[name].spec.init_timeout_s for name in waiting)
        people = self._services.people
        with trio.move_on_after(limit):
            if people is None or not any(catalog.servers[n].spec.credentials is PER_USER for n in waiting):
                await self._services.catalog.wait_until(
                    lambda c: all(_settled(c.view_for(self._person_key, self.id).servers[n]) for n in waiting)
                )
                return
            # A per_user server waiting for its person to sign in is done starting for
            # this turn: it goes on without it, and a call of it is ``needs_auth``.
            while not all(_settled(self._current().servers[n]) or people.sign_ins.pending(n, self.person)
                          for n in waiting):  # fmt: skip
                await people.sign_ins.until_change(self._services.catalog)

    @property
    def sign_ins(self) -> SignIns | None:
        """People's pending sign-ins to ``per_user`` servers (None: none configured)."""
        return self._services.people.sign_ins if self._services.people is not None else None

    def sign_in_needed(self, view: ServerView) -> SignIn | None:
        """This session's person's sign-in to ``view``'s server that waits for them, if any."""
        if view.spec.credentials is not PER_USER or self._services.people is None:
            return None
        return self._services.people.sign_ins.pending(view.name, self.person)

    # --------------------------------------------------------------- approvals

    def first_word(self, entry: ToolEntry, arguments: Any, *, trusted: bool | None = None) -> Decision:
        """What policy says of one call before anyone is asked: allow, ask or deny
        (``trusted``: as the call's turn saw its server)."""
        policy = self._services.policy
        return policy.decide(entry, arguments, tenant=self.tenant, memory=self.memory, trusted=trusted)

    async def authorize(
        self, entry: ToolEntry, arguments: Any, decision: Decision | None = None
    ) -> Authorization:
        """Decide one call (``decision``: its ``first_word``, if taken already); ask the
        host when policy says ask. Allow and deny return without a checkpoint."""
        policy = self._services.policy
        if decision is None:
            decision = self.first_word(entry, arguments)
        if decision.action is Action.DENY:
            return Authorization(Action.DENY, "deny", f"call to {entry.id} denied: {decision.reason}")
        if decision.action is Action.ALLOW:
            policy.allowed(entry)
            return Authorization(Action.ALLOW, "allow", decision.reason)
        desk = self._services.approvals
        permission = permission_of(entry.server, entry.name)
        request = ApprovalRequest(
            desk.next_id(),
            entry.id,
            entry.server,
            permission,
            dict(arguments),
            decision.reason,
            self.id,
            self.tenant,
            self.person,
        )
        client = calling_client(self) if self.prompts_client else None
        approver = approver_for(client, permission, policy.settings.operator_only)
        tracing = TRACING.active
        if tracing is None:
            verdict = await desk.ask(request, approver)
        else:
            with tracing.approval_span(entry.id):  # the wait, as a child of the call's span
                verdict = await desk.ask(request, approver)
        action = Action(verdict.approval.decision)
        if verdict.denial is None:
            if verdict.approval.remember == "session":
                self.memory[(permission, entry.fingerprint)] = action
            elif verdict.approval.remember == "always":
                policy.remember_always(self.tenant, entry, action)
        if action is Action.ALLOW:
            policy.allowed(entry)
            return Authorization(Action.ALLOW, "ask", "approved")
        return Authorization(
            Action.DENY, "ask", verdict.denial or f"call to {entry.id} denied by the approver"
        )

    # ---------------------------------------------------------- private servers

    async def _spawn_private_servers(self) -> None:
        if not self.runs_private:
            return
        for spec in self._services.private_servers:
            if spec.name not in self._private:
                await self._spawn_private(spec)

    async def _spawn_private(self, spec: ServerSpec) -> None:
        pair: Channels[ConnectionMessage] = open_mailbox()
        send, receive = pair
        done = trio.Event()
        self._private[spec.name] = (send, done)
        await self._services.router.send(RegisterServer(spec, send, owner=self.id))
        warm = self._services.warm
        connector = warm.connector(spec) if warm is not None else None
        actor = self._services.connections.actor(
            spec,
            receive,
            owner=self.id,
            restart=False,
            client=self.client,
            connector=connector,
            wanted_logs=self._logs.level,
        )
        await run_actor(self._nursery, actor, done)
        await send.send(EnsureStarted())

    async def _stop_private(self) -> None:
        """Stop the private connections (their processes go with them)."""
        for send, _done in self._private.values():
            try_send(send, Command(Control.STOP))
        for _send, done in self._private.values():
            await done.wait()
