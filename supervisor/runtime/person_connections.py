"""Each person's own connections to ``per_user`` servers.

A ``per_user`` server (``credentials: "per_user"``) is in the shared catalog with no
connection of its own: its mailbox is read here and refuses what reaches it. Each
person P who needs it gets one connection actor of their own, with a connector whose
vault is P's (``StoreVault.for_person``: P's tokens, refresh token and DPoP key),
whose authorizer files P's authorization URL in ``SignIns`` instead of opening a
browser, and which, for a server with ``oauth.token_exchange``, first exchanges the
token P signed in to us with (``signed_in``) for one of the server's. Its views are
the router's overlay of the owner ``person:<P>``, which every session of P sees over
the shared catalog (``Catalog.view_for``). Never one shared session with swapped
headers: one connection per (server, person).

Started lazily, at the first turn of a session of P (``ensure``), and ended, with
the overlay, once P has had no open session for ``idle_s`` (the gateway's
``session_idle_s``). The connections run in the pool's own nursery (``running``), a
lifetime inside the shared connections' one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager

import attrs
import trio

from actors.auth.settings import OAuthSettings
from actors.connection.messages import (
    CallTool,
    Command,
    ConnectionMessage,
    ConnectionStatus,
    Control,
    EnsureStarted,
    GetStatus,
    Subscribe,
    unavailable,
)
from actors.mailbox import Channels, answer, open_mailbox, try_send
from actors.redaction import Redactor
from actors.router.actor import CatalogCell, DropOwner, RegisterServer
from actors.router.catalog import Catalog, ServerView
from actors.spec import Credentials, ServerSpec
from actors.transports.base import Connector
from supervisor.runtime.connections import ConnectionFactory, run_actor
from supervisor.runtime.lifetimes import SHUTDOWN_GRACE_S, lifetime
from supervisor.runtime.sign_ins import PersonAuthorizer, SignIns
from supervisor.settings.model import Config
from supervisor.store import Store
from supervisor.store.vault import StoreVault

PERSON = "person:"


def person_owner(person: str) -> str:
    """The router's owner key of a person's connections (a session's is its id)."""
    return f"{PERSON}{person}"


def per_user(specs: Iterable[ServerSpec]) -> tuple[ServerSpec, ...]:
    """The ``per_user`` servers of a config's servers."""
    return tuple(spec for spec in specs if spec.credentials is Credentials.PER_USER)


@attrs.define(eq=False)
class _Person:
    """One person's connections, and whether anything still holds them."""

    mailboxes: dict[str, trio.MemorySendChannel[ConnectionMessage]] = attrs.Factory(dict)
    done: list[trio.Event] = attrs.Factory(list)
    sessions: int = 0
    idle_since: float = 0.0
    starting: trio.Lock = attrs.Factory(trio.Lock)


class PersonConnections:
    """The pool; see the module docstring."""

    def __init__(
        self,
        specs: Iterable[ServerSpec],
        factory: ConnectionFactory,
        vault: StoreVault | None,
        sign_ins: SignIns,
        *,
        idle_s: Callable[[], float],
        extra_secrets: tuple[str, ...] = (),
    ) -> None:
        self.specs = {spec.name: spec for spec in per_user(specs)}
        self.factory = factory
        self.sign_ins = sign_ins
        self._vault = vault
        self._idle_s = idle_s
        self._extra = extra_secrets
        self._placeholders: dict[str, Channels[ConnectionMessage]] = {n: open_mailbox() for n in self.specs}
        self._people: dict[str, _Person] = {}
        self._stopping: dict[str, trio.Event] = {}
        self._nursery: trio.Nursery | None = None
        exchanging = (OAuthSettings.from_mapping(spec.oauth).token_exchange for spec in self.specs.values())
        self._exchanging = any(exchanging)
        self._inbound: dict[str, str] = {}  # person → the access token they last signed in to us with
        self.cell: CatalogCell | None = None
        """The router's catalog cell (the supervisor sets it once the router is built)."""

    @classmethod
    def of(
        cls, factory: ConnectionFactory, store: Store | None, config: Callable[[], Config]
    ) -> PersonConnections:
        """The pool of a supervisor running ``config()`` now (people's tokens in ``store``;
        the idle time, the gateway's ``session_idle_s``, as a reload leaves it)."""
        vault = StoreVault(store) if store is not None else None
        now = config()
        idle_s = lambda: config().gateway.session_idle_s  # noqa: E731
        return cls(now.servers, factory, vault, SignIns(), idle_s=idle_s, extra_secrets=now.secrets)

    def signed_in(self, person: str, token: str) -> None:
        """A request of ``person`` came with ``token`` from the identity provider (the
        guard's sign-in): the latest is what token exchange sends for them
        (``oauth.token_exchange``). Kept in memory only, and only while a server
        exchanges; dropped when the person's connections end."""
        if self._exchanging:
            self._inbound[person] = token

    def others(self, specs: Iterable[ServerSpec]) -> list[ServerSpec]:
        """``specs`` without the ``per_user`` servers: what the shared connections run."""
        return [spec for spec in specs if spec.name not in self.specs]

    def placeholder(self, name: str) -> trio.MemorySendChannel[ConnectionMessage] | None:
        """The shared mailbox of a ``per_user`` server (it answers a status at once), else None."""
        pair = self._placeholders.get(name)
        return None if pair is None else pair[0]

    def registered(self) -> list[tuple[ServerSpec, trio.MemorySendChannel[ConnectionMessage]]]:
        """The ``per_user`` servers and their placeholder mailboxes (the router's first catalog)."""
        return [(spec, self._placeholders[name][0]) for name, spec in self.specs.items()]

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Read the placeholders' mailboxes, and run people's connections, for the block."""
        async with lifetime(self._stop_all) as nursery:
            self._nursery = nursery
            for name, (_send, receive) in self._placeholders.items():
                nursery.start_soon(self._refuse, name, receive)
            yield
            self._nursery = None

    @asynccontextmanager
    async def held(self, person: str) -> AsyncIterator[None]:
        """A session of ``person`` is open: their connections stay while any is."""
        held = self._people.setdefault(person, _Person())
        held.sessions += 1
        try:
            yield
        finally:
            held.sessions -= 1
            held.idle_since = trio.current_time()

    async def ensure(self, person: str) -> None:
        """Start ``person``'s connections that are not running yet (their overlay in the
        catalog before this returns); restart one that gave up on authorization, so
        the person's next call starts a new sign-in."""
        if not self.specs or self._nursery is None:
            return
        if (stopping := self._stopping.get(person)) is not None:
            await stopping.wait()  # their idle connections are ending: then start afresh
        held = self._people.setdefault(person, _Person())
        async with held.starting:
            mine = self._catalog().overlays.get(person_owner(person), {})
            for name, spec in self.specs.items():
                if name not in held.mailboxes:
                    await self._start(person, held, spec)
                elif self._gave_up(mine.get(name), name, person):
                    try_send(held.mailboxes[name], Command(Control.RESTART))
            owner = person_owner(person)
            assert self.cell is not None
            await self.cell.wait_until(lambda c: len(c.overlays.get(owner, ())) == len(self.specs))

    def _gave_up(self, view: ServerView | None, name: str, person: str) -> bool:
        """Down for want of authorization, with no sign-in of the person waiting."""
        waiting = self.sign_ins.pending(name, person) is not None
        return view is not None and view.condition == "needs_auth" and not waiting

    def _catalog(self) -> Catalog:
        assert self.cell is not None
        return self.cell.current

    async def _start(self, person: str, held: _Person, spec: ServerSpec) -> None:
        assert self._nursery is not None
        send, receive = open_mailbox()
        owner = person_owner(person)
        held.mailboxes[spec.name] = send
        await self.factory.router.send(RegisterServer(spec, send, owner=owner))
        connector = self._connector(person)
        actor = self.factory.actor(spec, receive, owner=owner, connector=connector)
        done = trio.Event()
        held.done.append(done)
        await run_actor(self._nursery, actor, done)
        await send.send(EnsureStarted())  # needed now: its sign-in, if any, is filed at once
        if len(held.done) == 1:  # the person's first: their idle end is watched from now
            self._nursery.start_soon(self._end_when_idle, person, held)

    def _connector(self, person: str) -> Connector:
        from actors.transports.remote import RemoteConnector  # the HTTP client: on first use

        vault = self._vault.for_person(person) if self._vault is not None else None
        extra = self._extra
        return RemoteConnector(
            lambda spec: Redactor((*spec.secrets, *extra)),
            vault=vault,
            authorizer=PersonAuthorizer(self.sign_ins, person),
            subject_token=lambda: self._inbound.get(person),
        )

    def restart(self, name: str, person: str) -> None:
        """Restart ``person``'s connection to ``name`` (``auth login --user`` stored their
        tokens): it reads them anew, and a sign-in it waited for is dropped."""
        held = self._people.get(person)
        if held is not None and name in held.mailboxes:
            try_send(held.mailboxes[name], Command(Control.RESTART))

    async def _end_when_idle(self, person: str, held: _Person) -> None:
        """End ``person``'s connections once no session of theirs has been open for
        ``idle_s`` (checked when that time is up, so a returning person keeps them)."""
        while True:
            if held.sessions:
                await trio.sleep(self._idle_s())
                continue
            due = held.idle_since + self._idle_s()
            if trio.current_time() < due:
                await trio.sleep_until(due)
                continue
            break
        del self._people[person]
        self._inbound.pop(person, None)
        self._stopping[person] = stopped = trio.Event()
        try:
            await self._stop([held])
            await self.factory.router.send(DropOwner(person_owner(person)))
        finally:
            del self._stopping[person]
            stopped.set()

    async def _stop(self, people: list[_Person]) -> None:
        """Stop connections (each tears its server down) and wait, bounded, for them."""
        for held in people:
            for send in held.mailboxes.values():
                try_send(send, Command(Control.STOP))
        with trio.move_on_after(SHUTDOWN_GRACE_S):
            for held in people:
                for done in held.done:
                    await done.wait()

    async def _stop_all(self) -> None:
        await self._stop(list(self._people.values()))

    async def _refuse(self, name: str, receive: trio.MemoryReceiveChannel[ConnectionMessage]) -> None:
        """The shared placeholder's mailbox: calls come through a person's connection,
        never here (a caller with no session has no person)."""
        async for message in receive:
            if isinstance(message, CallTool | Subscribe):
                why = "each person signs in for themselves: call it in a session, on its person's connection"
                answer(message.reply, unavailable(name, why))
            elif isinstance(message, GetStatus):  # no connection of its own: nothing in flight
                answer(message.reply, ConnectionStatus((), 0, None))

    def people(self, name: str) -> Mapping[str, int] | None:
        """How many people's connections to ``name`` are in each state (None: not a
        ``per_user`` server). A sign-in waiting for its person counts as ``needs_auth``."""
        if name not in self.specs:
            return None
        counts: Counter[str] = Counter()
        for owner, views in self._catalog().overlays.items():
            view = views.get(name)
            if view is None or not owner.startswith(PERSON):
                continue
            waiting = self.sign_ins.pending(name, owner.removeprefix(PERSON)) is not None
            counts["needs_auth" if waiting or view.condition == "needs_auth" else view.state.value] += 1
        return dict(sorted(counts.items()))
