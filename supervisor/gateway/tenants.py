"""The per-tenant state of new-era gateway clients, with idle expiry.

Per-request-era clients have no sessions, yet a tenant's activations (``tool_search``)
and its "for the session" approvals must outlive one request. So each tenant gets one
supervisor ``Session`` (and one ``GatewayCore`` over it), opened at its first request
and held by a task of a nursery we own (as ``supervisor/admin/hosted.py`` holds HTTP
sessions). It ends after ``idle_s`` with nothing in use: no request being answered,
no call parked between input-required rounds, no ``subscriptions/listen`` stream
open. The next request opens a fresh one.

The tenant session does not run ``scope: session`` servers (``Session.runs_private``):
those need one handshake-era session each, which a new-era client does not have. Nor
does it put trust prompts to its clients (``Session.prompts_client``): their ``ask``
decisions go to the operator, as before.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import attrs
import trio

from actors.log_events import get_logger
from actors.protocol.messages import META_CLIENT_INFO, META_PROTOCOL_VERSION
from supervisor.gateway.core import GatewayCore
from supervisor.gateway.fanout import ResourceFanout
from supervisor.gateway.parked import ParkedCall
from supervisor.sessions.session import Session

log = get_logger("supervisor.gateway")

OpenSession = Callable[[str, str | None], AbstractAsyncContextManager[Session]]
"""``tenant, person -> async with … as session`` (``lambda t, p: sup.session(tenant=t, person=p)``)."""
Key = tuple[str, str | None]
"""A state's tenant and person (None: the tenant's name, as for a static token)."""


@attrs.define(eq=False)
class TenantState:
    """One tenant's session, its core, and what of it is in use."""

    tenant: str
    person: str | None
    session: Session
    core: GatewayCore
    fanout: ResourceFanout
    parked: dict[str, ParkedCall] = attrs.field(factory=dict)
    users: int = 0
    """Requests being answered, listen streams open, calls parked."""
    touched: float = 0.0
    changed: trio.Event = attrs.field(factory=trio.Event)
    opened_at: float = attrs.field(factory=time.time)
    """Wall-clock time it was opened (for the listing's ``age_s``)."""
    client: dict[str, Any] | None = None
    """The ``clientInfo`` its latest request's ``_meta`` named: the era has no handshake to
    keep it from, and the operator's listing wants to say who is using the state."""
    protocol_version: str | None = None

    def heard(self, meta: Any) -> None:
        """Note who sent a request, from its ``_meta`` (for ``GET /v1/gateway/sessions``)."""
        if not isinstance(meta, Mapping):
            return
        info, version = meta.get(META_CLIENT_INFO), meta.get(META_PROTOCOL_VERSION)
        if isinstance(info, Mapping):
            self.client = dict(info)
        if isinstance(version, str):
            self.protocol_version = version

    def _bump(self, delta: int) -> None:
        self.users += delta
        self.touched = trio.current_time()
        self.changed.set()
        self.changed = trio.Event()


class Sharing(Protocol):
    """States shared with other replicas (``tenant_sharing.py``)."""

    async def opened(self, state: TenantState) -> None: ...

    async def after(self, state: TenantState) -> None: ...

    async def closed(self, state: TenantState) -> None: ...


class TenantStates:
    """Every tenant's ``TenantState``; ``run`` owns the holders."""

    def __init__(
        self, open_session: OpenSession, core_of: Callable[[Session], GatewayCore], idle_s: float
    ) -> None:
        self._open_session = open_session
        self._core_of = core_of
        self.idle_s = idle_s
        self._states: dict[Key, TenantState] = {}
        self._opening = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self.sharing: Sharing | None = None
        """With a cluster: the states of other replicas' (``tenant_sharing.py``)."""

    def __len__(self) -> int:
        return len(self._states)

    def in_flight(self) -> int:
        """Requests every tenant's core is answering (for the metrics)."""
        return sum(state.core.in_flight for state in self._states.values())

    def listing(self, tenant: str | None) -> list[TenantState]:
        """The open states of ``tenant`` (None: every tenant's), oldest first."""
        return [s for s in self._states.values() if tenant is None or s.tenant == tenant]

    def open_keys(self) -> list[Key]:
        """The keys of the states open now (a copy)."""
        return list(self._states)

    def get(self, tenant: str, person: str | None = None) -> TenantState | None:
        """The open state of the tenant's ``person``, if any (nothing is opened)."""
        return self._states.get((tenant, person))

    def bind(self, nursery: trio.Nursery | None) -> None:
        """Hold states in ``nursery`` (the front's) from now on (None: open no more)."""
        self._nursery = nursery

    @asynccontextmanager
    async def use(self, tenant: str, person: str | None = None) -> AsyncIterator[TenantState]:
        """The state of the tenant's ``person`` (opened if need be), kept from expiring
        in the block. Signed-in people of one tenant each have their own: their calls
        are audited, and their approvals remembered, as theirs."""
        key = (tenant, person)
        state = self._states.get(key)
        if state is None:
            async with self._opening:
                state = self._states.get(key)
                if state is None:
                    state = await self._open(key)
        state._bump(+1)
        try:
            try:
                yield state
            except Exception:  # an error answer: what changed before it is shared all the same
                if self.sharing is not None:
                    await self.sharing.after(state)
                raise
            if self.sharing is not None:  # what the client is told is what other replicas show
                await self.sharing.after(state)
        finally:
            state._bump(-1)

    def hold(self, state: TenantState) -> Callable[[], None]:
        """Keep ``state`` in use until the returned release is called (once)."""
        state._bump(+1)
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                state._bump(-1)

        return release

    async def _open(self, key: Key) -> TenantState:
        if self._nursery is None:
            raise RuntimeError("the new-era gateway is not running")
        state: TenantState = await self._nursery.start(self._hold, key)
        return state

    async def _hold(self, key: Key, *, task_status: trio.TaskStatus[TenantState]) -> None:
        started = False
        tenant, person = key
        try:
            async with self._open_session(tenant, person) as session:
                session.runs_private = False
                session.prompts_client = False
                core, fanout = self._core_of(session), ResourceFanout(session)
                state = TenantState(tenant, person, session, core, fanout, touched=trio.current_time())
                self._states[key] = state
                try:
                    if self.sharing is not None:
                        await self.sharing.opened(state)
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(fanout.run)
                        task_status.started(state)
                        started = True
                        await self._until_idle(state)
                        if self.sharing is not None:
                            await self.sharing.closed(state)
                        nursery.cancel_scope.cancel()
                finally:
                    if self._states.get(key) is state:
                        del self._states[key]
                    for parked in list(state.parked.values()):
                        parked.cancel()
        except Exception:
            if not started:
                raise
            log.exception("gateway tenant state failed", extra={"fields": {"tenant": tenant}})

    async def _until_idle(self, state: TenantState) -> None:
        """Return once the state was unused for ``idle_s`` (never while in use)."""
        while True:
            if state.users == 0 and trio.current_time() >= state.touched + self.idle_s:
                del self._states[state.tenant, state.person]  # no await since the check: nobody took it
                return
            deadline = state.touched + self.idle_s if state.users == 0 else math.inf
            with trio.move_on_at(deadline):
                await state.changed.wait()
