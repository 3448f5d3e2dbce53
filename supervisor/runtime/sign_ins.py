"""People's pending sign-ins to ``per_user`` servers: the authorization URLs handed out
and the browser redirects that finish them.

A person's connection to a ``per_user`` server runs the OAuth authorization-code flow
with a :class:`PersonAuthorizer`: it opens no browser on the server running the
supervisor, it files the authorization URL here (the caller's call is answered
``needs_auth`` with it) and waits for the person's browser to come back to the
service's callback route (``GET /v1/oauth/callback``, ``finish``). The flow's ``state``
is the key: one-time (taken by the first callback), bound to (server, person) by the
flow that made it, expiring (``SIGN_IN_S``). Pending sign-ins live in memory: after a
restart the person just starts again.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlsplit

import attrs
import trio

from actors.auth.authorizers import CallbackError
from actors.router.actor import CatalogCell
from actors.router.envelope import CallError, Envelope

SIGN_IN_S = 600.0
"""How long an authorization URL stays good: the person's time to sign in."""

CALLBACK_PATH = "/v1/oauth/callback"


class SignInRefused(Exception):
    """A callback that finishes no pending sign-in (unknown, used or expired ``state``)."""


@attrs.define(eq=False)
class SignIn:
    """One person's pending sign-in to one server."""

    server: str
    person: str
    url: str
    state: str
    id: str = attrs.field(factory=lambda: secrets.token_hex(8))
    """The elicitation id a client is told (not the ``state``, which finishes it)."""
    back: trio.MemorySendChannel[str] | None = None
    finished: trio.Event = attrs.field(factory=trio.Event)


class SignIns:
    """The pending sign-ins of every person, by ``state`` and by (server, person)."""

    def __init__(self, base_url: str = "http://localhost") -> None:
        self.base_url = base_url
        """Where people's browsers reach the service (``serve`` sets its bound address)."""
        self._by_state: dict[str, SignIn] = {}
        self._by_key: dict[tuple[str, str], SignIn] = {}
        self._changed = trio.Event()
        self._listeners: list[Callable[[SignIn], object]] = []  # ``listening``

    @contextmanager
    def listening(self, finished: Callable[[SignIn], object]) -> Iterator[None]:
        """Tell ``finished`` of each sign-in that finishes while the block runs."""
        self._listeners.append(finished)
        try:
            yield
        finally:
            self._listeners.remove(finished)

    def callback_url(self) -> str:
        """The redirect URI of people's sign-ins: the service's callback route."""
        return f"{self.base_url}{CALLBACK_PATH}"

    def pending(self, server: str, person: str) -> SignIn | None:
        """``person``'s sign-in to ``server`` that waits for their browser, if any."""
        return self._by_key.get((server, person))

    async def wait_changed(self) -> None:
        """Until a sign-in is filed or ends."""
        await self._changed.wait()

    async def until_change(self, cell: CatalogCell) -> None:
        """Until the catalog moves on from now, or a sign-in is filed or ends."""
        seen = cell.current
        async with trio.open_nursery() as nursery:

            async def woken(wait: Callable[[], Awaitable[object]]) -> None:
                await wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(woken, lambda: cell.wait_until(lambda c: c is not seen))
            nursery.start_soon(woken, self.wait_changed)

    def _poke(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for_browser(self, server: str, person: str, url: str) -> str:
        """File ``url`` as ``person``'s sign-in and wait for their browser's redirect
        (the URL it came back to); CallbackError when it does not come in time."""
        state = dict(parse_qsl(urlsplit(url).query)).get("state", "")
        send, receive = trio.open_memory_channel[str](1)
        sign_in = SignIn(server, person, url, state, back=send)
        self._by_state[state] = sign_in
        self._by_key[(server, person)] = sign_in
        self._poke()
        try:
            with trio.move_on_after(SIGN_IN_S):
                return await receive.receive()
            raise CallbackError(
                f"{person} did not finish signing in to mcp server {server} within {SIGN_IN_S:g} s;"
                " their next call starts a new sign-in"
            )
        finally:
            self._by_state.pop(state, None)
            if self._by_key.get((server, person)) is sign_in:
                del self._by_key[(server, person)]
            self._poke()

    def finish(self, query: str) -> SignIn:
        """The browser came back with ``query`` (``code`` and ``state``, or an ``error``):
        hand it to the waiting flow, once. SignInRefused when no sign-in waits for it."""
        state = dict(parse_qsl(query)).get("state")
        sign_in = self._by_state.pop(state or "", None)
        if sign_in is None or sign_in.back is None:
            raise SignInRefused(
                "this sign-in link is unknown, used already or expired; call the tool again for a new one"
            )
        sign_in.back.send_nowait(f"{self.callback_url()}?{query}")
        sign_in.finished.set()
        for listener in list(self._listeners):
            listener(sign_in)
        return sign_in


@attrs.frozen
class PersonAuthorizer:
    """The ``Authorizer`` of one person's connections: no browser here, the URL filed in
    ``sign_ins`` for the person's own client, the redirect to the service's route."""

    sign_ins: SignIns
    person: str

    @property
    def redirect_uri(self) -> str:
        return self.sign_ins.callback_url()

    async def authorize(self, server: str, url: str) -> str:
        return await self.sign_ins.wait_for_browser(server, self.person, url)


def needs_auth(tool: str, sign_in: SignIn) -> Envelope:
    """The envelope of a call whose person has not signed in to its ``per_user`` server:
    their own authorization URL, for them alone."""
    message = (
        f"mcp server {sign_in.server} acts with each person's own account, and {sign_in.person} "
        "has not signed in to it yet: open authorization_url in your browser, then call again"
    )
    error = CallError("needs_auth", message, authorization_url=sign_in.url, elicitation_id=sign_in.id)
    return Envelope(ok=False, tool=tool, error=error)
