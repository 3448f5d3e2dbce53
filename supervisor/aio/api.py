"""The embedding API for an asyncio host: ``Supervisor.open``, sessions, turns, in the
host's own thread.

``supervisor.aio.Supervisor.open`` starts a Trio guest run on the running asyncio loop
(``supervisor/aio/guest.py``), opens the Trio ``supervisor.Supervisor`` inside it, and
hands the host wrappers whose requests are awaited from asyncio. What the host passes
in (the approver, the session's sampling, elicitation and roots handlers, the
supervisor-level ``server_requests`` handler, the authorizer) are asyncio coroutine
functions, run on the host's loop. Errors and envelopes are the Trio API's.

Leaving the ``async with`` (also when the host is cancelled or raises, and on Ctrl-C
under ``asyncio.run``) leaves the open sessions, then the supervisor (every server
reaped), then ends the guest run, and waits for all of it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import trio

from actors.connection.client_side import ServerRequestHandler
from actors.connection.messages import ConnectionStatus, Control
from actors.router.catalog import ServerView
from actors.router.envelope import Envelope
from actors.spec import ServerSpec
from actors.transports.base import Connector
from supervisor import service
from supervisor.aio.guest import Guest, Holding, guest_run
from supervisor.aio.turns import Turn
from supervisor.runtime.reload_plan import ReloadPlan
from supervisor.sessions.approvals import Approver
from supervisor.sessions.handlers import RequestHandler, RootsSource
from supervisor.sessions.session import Session as TrioSession
from supervisor.sessions.subscriptions import ResourceUpdate
from supervisor.settings.model import Config

T = TypeVar("T")
P = ParamSpec("P")

if TYPE_CHECKING:  # the OAuth code (and httpx2) loads only when a server uses it
    from actors.auth.provider import Authorizer


class Supervisor:
    """The running service, for an asyncio host; obtain one with ``Supervisor.open``."""

    def __init__(self, guest: Guest, running: service.Supervisor) -> None:
        self._guest = guest
        self._running = running
        self._sessions: list[SessionBlock] = []

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
        """Run the supervisor for the ``async with`` block, on the running asyncio loop.

        Takes what the Trio ``supervisor.Supervisor.open`` takes (its docstring says
        what each does), with ``approver``, ``server_requests`` and ``authorizer.authorize``
        as asyncio coroutine functions, each call run as a task on this loop in a copy of
        the context the block was opened in. ``connector`` and ``reread`` are the Trio
        API's own (a connector is Trio code; ``reread`` is a plain function).

        Raises:
          RuntimeError: no asyncio loop runs in this thread, or a Trio run is active in
            it already (one per thread): the message says what to do.
          StateError: the state directory cannot be used (as the Trio API).

        The block's own error comes out unchanged; an error of the supervisor's teardown
        comes out as the Trio API raises it (an ``ExceptionGroup``).
        """
        async with guest_run() as guest:
            opener = functools.partial(
                service.Supervisor.open,
                config,
                _hosted(guest, approver, "the approver"),
                state_dir=state_dir,
                connector=connector,
                server_requests=_hosted(guest, server_requests, "the server_requests handler"),
                client_capabilities=client_capabilities,
                authorizer=None if authorizer is None else _HostAuthorizer(guest, authorizer),
                instance_kind=instance_kind,
                subreaper=subreaper,
                reread=reread,
            )
            async with Holding(guest, opener) as running:
                supervisor = cls(guest, running)
                try:
                    yield supervisor
                finally:
                    await supervisor._leave_sessions()

    @property
    def config(self) -> Config:
        """The config it runs now (the one it was opened with, until a ``reload``)."""
        return self._running.config

    @property
    def instance_id(self) -> str:
        return self._running.instance_id

    @property
    def state_dir(self) -> Path:
        return self._running.state_dir

    def servers(self) -> Mapping[str, ServerView]:
        """The shared servers as the router sees them now (an immutable snapshot)."""
        return self._running.servers()

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
    ) -> AbstractAsyncContextManager[Session]:
        """One conversation (``async with sup.session() as session``), as the Trio API's.
        ``sampling``, ``elicitation`` and a callable ``roots`` are asyncio coroutine
        functions ``(server, params)``, run on this loop in a copy of the context this
        is called in; ``roots`` may also be a list."""
        guest = self._guest
        opener = functools.partial(
            self._running.session,
            tenant=tenant,
            person=person,
            host_tools=host_tools,
            pinned=tuple(pinned),
            sampling=_hosted(guest, sampling, "the sampling handler"),
            elicitation=_hosted(guest, elicitation, "the elicitation handler"),
            roots=guest.host(roots, "the roots handler") if callable(roots) else roots,
        )
        block = SessionBlock(guest, opener)
        self._sessions = [*(open_ for open_ in self._sessions if not open_.ended), block]
        return block

    async def _leave_sessions(self) -> None:
        """The sessions still open end before the supervisor does (as they would in Trio)."""
        for block in reversed(self._sessions):
            await block.leave()

    async def cancel_request(self, request_id: str, tenant: str | None = "default") -> bool:
        """Cancel the call (or read, prompt get) ``tenant`` made with this ``request_id``
        (None: of every tenant): it ends ``cancelled`` and its server is told. False when
        there is no such request in flight."""
        return await self._guest.run(_cancel_request, self._running, request_id, tenant)

    async def add_server(self, spec: ServerSpec) -> None:
        """Supervise one more shared server (the Trio ``add_server``)."""
        await self._guest.run(self._running.add_server, spec)

    async def remove_server(self, name: str) -> None:
        """Stop supervising a shared server (the Trio ``remove_server``)."""
        await self._guest.run(self._running.remove_server, name)

    async def command(self, server: str, control: Control) -> None:
        """Restart, enable, disable or stop one shared server."""
        await self._guest.run(self._running.command, server, control)

    async def connection_status(self, server: str, timeout_s: float = 2.0) -> ConnectionStatus | None:
        """What the server's connection actor alone knows (stderr tail, calls in flight)."""
        return await self._guest.run(self._running.connection_status, server, timeout_s)

    async def reload(self, config: Config | None = None, *, trigger: str = "host") -> ReloadPlan:
        """Apply a changed config (default: the file read again) without a restart."""
        return await self._guest.run(self._running.reload, config, trigger=trigger)


def _hosted(
    guest: Guest, fn: Callable[P, Awaitable[T]] | None, what: str
) -> Callable[P, Awaitable[T]] | None:
    """A host's coroutine function for the Trio side (``Guest.host``), or None."""
    return None if fn is None else guest.host(fn, what)


async def _cancel_request(running: service.Supervisor, request_id: str, tenant: str | None) -> bool:
    """(Trio side) The registry is Trio's: it sends to connection actors' mailboxes."""
    return running.requests.cancel(request_id, tenant)


class Session:
    """One conversation of an asyncio host (``async with sup.session() as session``)."""

    def __init__(self, guest: Guest, session: TrioSession) -> None:
        self._guest = guest
        self._session = session
        self.resource_updates = ResourceUpdates(guest, session)
        """Updates of the resources this session subscribed to (``async for``); ends
        when the session does."""

    @property
    def id(self) -> str:
        return self._session.id

    @property
    def tenant(self) -> str:
        return self._session.tenant

    async def begin_turn(self) -> Turn:
        """Start a turn: start the lazy servers it needs, then freeze the catalog."""
        return Turn(self._guest, await self._guest.run(self._session.begin_turn))

    async def subscribe(self, uri: str, server: str | None = None) -> Envelope:
        """Subscribe to a resource: its updates come on ``resource_updates``."""
        return await self._guest.run(self._session.subscribe, uri, server)

    async def unsubscribe(self, uri: str, server: str | None = None) -> Envelope:
        """Leave a subscription (ok also when there was none)."""
        return await self._guest.run(self._session.unsubscribe, uri, server)


class ResourceUpdates:
    """A session's resource updates, as an asyncio async iterator."""

    def __init__(self, guest: Guest, session: TrioSession) -> None:
        self._guest = guest
        self._updates = session.resource_updates

    def __aiter__(self) -> ResourceUpdates:
        return self

    async def __anext__(self) -> ResourceUpdate:
        try:
            return await self._guest.run(self._updates.receive)
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None


class SessionBlock:
    """``sup.session(...)``: the Trio session held for the block, handed on wrapped."""

    def __init__(self, guest: Guest, opener: Callable[[], AbstractAsyncContextManager[TrioSession]]) -> None:
        self._guest = guest
        self._holding = Holding(guest, opener)

    @property
    def ended(self) -> bool:
        """Left, or never entered."""
        return self._holding.done

    async def leave(self) -> None:
        """End the session now (the supervisor does, for sessions open when it closes)."""
        await self._holding.leave()

    async def __aenter__(self) -> Session:
        return Session(self._guest, await self._holding.__aenter__())

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._holding.__aexit__(kind, error, tb)


class _HostAuthorizer:
    """A host's asyncio authorizer (``redirect_uri``, ``async authorize(server, url)``) for
    the Trio side."""

    def __init__(self, guest: Guest, authorizer: Authorizer) -> None:
        self._redirect = authorizer.redirect_uri
        self._authorize = guest.host(authorizer.authorize, "the authorizer's authorize")

    @property
    def redirect_uri(self) -> str:
        return self._redirect

    async def authorize(self, server: str, url: str) -> str:
        return await self._authorize(server, url)
