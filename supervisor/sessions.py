"""Sessions: one conversation of an agent host.

A ``Session`` owns a nursery for its private (``scope: session``) connections, which
end with it; it remembers which tools ``tool_search`` activated and which approvals
were given "for the session". ``begin_turn`` freezes the current catalog epoch into
a ``Turn`` (supervisor/turns.py).
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors.connection.actor import ConnectionActor
from actors.connection.messages import CallOutcome, Command, ConnectionMessage, Control, EnsureStarted
from actors.connection.spec import Scope, ServerSpec
from actors.connection.states import is_settled, needs_start
from actors.mailbox import Channels, open_mailbox, try_send
from actors.router.actor import DropOwner, RegisterServer
from actors.router.catalog import Catalog, ServerView, ToolEntry
from actors.router.trust import Action, Decision, permission_of
from supervisor.approvals import ApprovalRequest
from supervisor.turns import Turn

if TYPE_CHECKING:
    from supervisor.service import Supervisor

log = logging.getLogger("supervisor.sessions")


def _settled(view: ServerView) -> bool:
    """Done starting: serving, or down (a turn stops waiting for it either way)."""
    return is_settled(view.state, view.phase)


@attrs.frozen(slots=True)
class Authorization:
    """The final word on one call: ``action`` (allow or deny), what policy first said
    (``decided``: allow, ask or deny, for the audit), and why."""

    action: Action
    decided: str
    reason: str


class Session:
    """One conversation; owns its private connections, activations and approvals."""

    def __init__(
        self,
        supervisor: Supervisor,
        nursery: trio.Nursery,
        *,
        tenant: str = "default",
        host_tools: int = 0,
        pinned: Iterable[str] = (),
    ) -> None:
        self.id = secrets.token_hex(8)
        self.supervisor = supervisor
        self.tenant = tenant
        self.host_tools = host_tools
        self.pinned = tuple(pinned)
        self.activated: dict[str, None] = {}
        self.memory: dict[tuple[str, str], Action] = {}
        self._nursery = nursery
        self._turns = itertools.count(1)
        self._private: dict[str, tuple[trio.MemorySendChannel[ConnectionMessage], trio.Event]] = {}
        # Answered reply channels, reused by the next calls (see ``Turn._call``).
        self.replies: list[Channels[CallOutcome]] = []
        # Per-epoch and per-config caches that keep begin_turn O(1) over a settled
        # catalog (catalogs and configs are immutable: identity is the key).
        self._starting: tuple[Catalog | None, tuple[ServerView, ...]] = (None, ())
        self._session_specs: tuple[object, tuple[ServerSpec, ...]] = (None, ())

    # ------------------------------------------------------------------- turns

    async def begin_turn(self) -> Turn:
        """Start a turn: start the lazy servers it needs, then freeze the catalog.

        A server whose tools are unknown (never listed, nothing cached) is started so
        its tools can be counted and found; with search off every lazy server is
        started, as the turn lists all tools. Each wait is bounded by the server's
        ``init_timeout``; one that is not up by then is unavailable in this turn.
        """
        await self._spawn_private_servers()
        catalog = self._current()
        await self._start_and_wait(catalog, lambda view: not view.known)
        catalog = self._current()
        search = self.search_enabled(catalog)
        if not search:
            await self._start_and_wait(catalog, lambda view: True)
            catalog = self._current()
        return Turn(self, f"{self.id}-{next(self._turns)}", catalog, search)

    def search_enabled(self, catalog: Catalog) -> bool:
        """``tool_search`` on or off for a turn over ``catalog``."""
        settings = self.supervisor.config.tool_search
        if settings.enabled == "auto":
            return len(catalog.tools) + self.host_tools > settings.threshold
        return bool(settings.enabled)

    def activate(self, tool_id: str) -> None:
        """Make a tool part of every later listing in this session."""
        self.activated[tool_id] = None

    def _current(self) -> Catalog:
        return self.supervisor.router.cell.current.view_for(self.id)

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
        with trio.move_on_after(limit):
            await self.supervisor.router.cell.wait_until(
                lambda c: all(_settled(c.view_for(self.id).servers[name]) for name in waiting)
            )

    # --------------------------------------------------------------- approvals

    def first_word(self, entry: ToolEntry, arguments: Any) -> Decision:
        """What policy says of one call before anyone is asked: allow, ask or deny."""
        return self.supervisor.policy.decide(entry, arguments, tenant=self.tenant, memory=self.memory)

    async def authorize(
        self, entry: ToolEntry, arguments: Any, decision: Decision | None = None
    ) -> Authorization:
        """Decide one call (``decision``: its ``first_word``, if taken already); ask the
        host when policy says ask. Allow and deny return without a checkpoint."""
        supervisor = self.supervisor
        if decision is None:
            decision = self.first_word(entry, arguments)
        if decision.action is Action.DENY:
            return Authorization(Action.DENY, "deny", f"call to {entry.id} denied: {decision.reason}")
        if decision.action is Action.ALLOW:
            supervisor.policy.allowed(entry)
            return Authorization(Action.ALLOW, "allow", decision.reason)
        desk = supervisor.approvals
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
        )
        verdict = await desk.ask(request)
        action = Action(verdict.approval.decision)
        if verdict.denial is None:
            if verdict.approval.remember == "session":
                self.memory[(permission, entry.fingerprint)] = action
            elif verdict.approval.remember == "always":
                supervisor.policy.remember_always(self.tenant, entry, action)
        if action is Action.ALLOW:
            supervisor.policy.allowed(entry)
            return Authorization(Action.ALLOW, "ask", "approved")
        return Authorization(
            Action.DENY, "ask", verdict.denial or f"call to {entry.id} denied by the approver"
        )

    # ---------------------------------------------------------- private servers

    async def _spawn_private_servers(self) -> None:
        config = self.supervisor.config
        cached, specs = self._session_specs
        if cached is not config:
            specs = tuple(s for s in config.servers if s.scope is Scope.SESSION and s.enabled)
            self._session_specs = (config, specs)
        for spec in specs:
            if spec.name not in self._private:
                await self._spawn_private(spec)

    async def _spawn_private(self, spec: ServerSpec) -> None:
        pair: Channels[ConnectionMessage] = open_mailbox()
        send, receive = pair
        done = trio.Event()
        self._private[spec.name] = (send, done)
        router = self.supervisor.router_mailbox
        await router.send(RegisterServer(spec, send, owner=self.id))
        actor = ConnectionActor(
            spec,
            self.supervisor.connector,
            receive,
            router.clone(),
            owner=self.id,
            restart=False,
            client_capabilities=self.supervisor.client_capabilities,
            server_requests=self.supervisor.server_requests,
        )

        async def run(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                await actor.run(task_status=task_status)
            finally:
                done.set()

        await self._nursery.start(run)
        await send.send(EnsureStarted())

    async def _close(self, grace_s: float) -> None:
        """Stop private connections (their processes go with them), forget the session."""
        for send, _done in self._private.values():
            try_send(send, Command(Control.STOP))
        with trio.move_on_after(grace_s):
            for _send, done in self._private.values():
                await done.wait()
        self._nursery.cancel_scope.cancel()
        try_send(self.supervisor.router_mailbox, DropOwner(self.id))
