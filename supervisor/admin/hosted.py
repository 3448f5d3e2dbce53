"""Sessions created over HTTP, each held open by a task of a nursery we own.

A ``Supervisor.session`` is an async context manager: its private connections live
in a nursery that must be entered and left by the same task. An HTTP session
outlives the request that created it, so each one gets a *holder* task in
``HostedSessions``' nursery that enters the context, reports the session, and waits
until ``close`` (``DELETE /v1/sessions/{sid}``) or shutdown. Leaving ``run`` cancels
every holder; each leaves its context, which closes the session's private servers
under the supervisor's shielded deadline.

Lookups take the caller's tenant: another tenant's session is simply not found
(the API answers 404, never 403, so ids do not leak across tenants). Listing and
closing also take None, every tenant (the operator's view); turns never do, so work
inside a session stays its tenant's. Each session
keeps its last ``max_turns`` turns; older turn ids answer 404.

The same nursery runs the calls streamed over SSE (``start_background``): a response
body generator must not own a nursery across its ``yield``s, so the call runs here
and the generator only reads what it produces. It also runs, per session, the task
that announces its resource updates on the event stream (to its tenant only).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors.log_events import get_logger
from supervisor.calls.turns import Turn
from supervisor.sessions.session import Session
from supervisor.web.held_sessions import HeldSessions

if TYPE_CHECKING:
    from supervisor.service import Supervisor

log = get_logger("supervisor.admin")

MAX_TURNS = 64
MAX_SESSIONS_PER_TENANT = 128
CLOSE_TIMEOUT_S = 15.0


class HostedClosed(RuntimeError):
    """The admin server is not running (not started yet, or shutting down)."""


class TooManySessions(RuntimeError):
    """A tenant already holds the most sessions it may."""


@attrs.define(eq=False)
class _Hosted:
    session: Session
    close_requested: trio.Event = attrs.field(factory=trio.Event)
    closed: trio.Event = attrs.field(factory=trio.Event)
    turns: OrderedDict[str, Turn] = attrs.field(factory=OrderedDict)

    @property
    def tenant(self) -> str:
        return self.session.tenant


class HostedSessions(HeldSessions[_Hosted]):
    """Sessions of HTTP clients, by id, per tenant."""

    not_running = HostedClosed
    not_running_text = "the admin API is not running"

    def __init__(
        self,
        supervisor: Supervisor,
        *,
        max_turns: int = MAX_TURNS,
        max_sessions_per_tenant: int = MAX_SESSIONS_PER_TENANT,
    ) -> None:
        super().__init__()
        self._supervisor = supervisor
        self._max_turns = max_turns
        self._max_sessions = max_sessions_per_tenant

    # ------------------------------------------------------------------ sessions

    async def create(
        self, tenant: str, *, host_tools: int = 0, pinned: Iterable[str] = (), person: str | None = None
    ) -> Session:
        """Open a session for ``tenant`` (made for ``person``: a signed-in caller's; None,
        the tenant's name); it stays open until ``close`` or shutdown."""
        nursery = self._running()
        if sum(1 for h in self._sessions.values() if h.session.tenant == tenant) >= self._max_sessions:
            raise TooManySessions(f"tenant already holds {self._max_sessions} sessions; delete some first")
        session: Session = await nursery.start(self._hold, tenant, host_tools, tuple(pinned), person)
        return session

    def listing(self, tenant: str | None) -> list[Session]:
        """The open sessions of ``tenant`` (None: of every tenant), oldest first."""
        return [h.session for h in self._open(tenant)]

    def get(self, session_id: str, tenant: str) -> Session | None:
        """The session, if it exists and belongs to ``tenant``."""
        hosted = self._lookup(session_id, tenant)
        return None if hosted is None else hosted.session

    async def close(self, session_id: str, tenant: str | None) -> bool:
        """Close a session of ``tenant`` (None: of any tenant) and wait (bounded) until
        its servers are gone."""
        return await self._close(session_id, tenant, CLOSE_TIMEOUT_S)

    def holds(self, session_id: str) -> bool:
        """Whether a session (of any tenant) is one of ours."""
        return session_id in self._sessions

    async def _hold(
        self,
        tenant: str,
        host_tools: int,
        pinned: tuple[str, ...],
        person: str | None,
        *,
        task_status: trio.TaskStatus[Session] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        hosted: _Hosted | None = None
        try:
            async with self._supervisor.session(
                tenant=tenant, host_tools=host_tools, pinned=pinned, person=person
            ) as session:
                hosted = _Hosted(session)
                self._sessions[session.id] = hosted
                self._running().start_soon(self._announce_updates, session)
                try:
                    task_status.started(session)
                    await hosted.close_requested.wait()
                finally:
                    del self._sessions[session.id]
        except Exception:
            if hosted is None:
                raise  # not started yet: the creating request gets the error
            # One client's session failing must not take the service down with it.
            log.exception("hosted session failed", extra={"fields": {"session": hosted.session.id}})
        finally:
            if hosted is not None:
                hosted.closed.set()

    async def _announce_updates(self, session: Session) -> None:
        """Hand the session's resource updates to ``/v1/events`` as ``resource_updated``
        events of its tenant; ends with the session (its update channel closes)."""
        async for update in session.resource_updates:
            self._supervisor.events.publish(
                {
                    "type": "resource_updated",
                    "tenant": session.tenant,
                    "session": session.id,
                    "uri": update.uri,
                    "server": update.server,
                }
            )

    # --------------------------------------------------------------------- turns

    def add_turn(self, session: Session, turn: Turn) -> None:
        """Remember a turn of a hosted session (only the last ``max_turns`` are kept)."""
        hosted = self._sessions.get(session.id)
        if hosted is None:
            return
        hosted.turns[turn.id] = turn
        while len(hosted.turns) > self._max_turns:
            hosted.turns.popitem(last=False)

    def get_turn(self, session_id: str, turn_id: str, tenant: str) -> Turn | None:
        """A remembered turn of a session of ``tenant``."""
        hosted = self._lookup(session_id, tenant)
        return None if hosted is None else hosted.turns.get(turn_id)

    def latest_turn(self, session_id: str, tenant: str) -> Turn | None:
        """The newest remembered turn of a session of ``tenant``."""
        hosted = self._lookup(session_id, tenant)
        if hosted is None or not hosted.turns:
            return None
        return next(reversed(hosted.turns.values()))

    # ---------------------------------------------------------------- background

    def start_background(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``fn(*args)`` in our nursery (for calls streamed over SSE)."""
        self._running().start_soon(fn, *args)
