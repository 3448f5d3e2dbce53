"""A remote server: the HTTP transport it gets, switched once if need be, and its connector.

Which transport a remote server gets (``ServerSpec.transport``):

- ``streamable-http`` / ``sse``: that one (``streamable_http.py``, ``legacy_sse.py``).
- ``auto`` (default): Streamable HTTP; if ``initialize`` is answered 400, 404 or 405
  — how servers of the old transport answer, per the spec's "backwards
  compatibility" section — the same URL is tried as an HTTP+SSE stream and
  ``initialize`` is replayed there. The switch happens inside one ``send``, so the
  actor never notices. Not after the server took our ``server/discover`` POST (it is
  unanswered, or was answered 2xx): that server speaks Streamable HTTP, and its 4xx
  is the refusal of ``initialize``.

Teardown (leaving :func:`open_remote_transport`, also when cancelled): stream tasks
are cancelled, the Streamable HTTP session is DELETEd under its own deadline, and
the pooled client is closed; all shielded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

import httpx2
import trio

from actors.log_events import get_logger
from actors.protocol.messages import Message
from actors.redaction import Redactor
from actors.spec import ServerSpec
from actors.transport_errors import TransportError
from actors.transports.base import Abilities, Connector, Transport
from actors.transports.http_link import TRANSPORT_CHOICES, FallBack, Inbox, RemoteLink, new_client
from actors.transports.legacy_sse import LegacySseTransport
from actors.transports.streamable_http import StreamableHttpTransport

if TYPE_CHECKING:
    from actors.auth.provider import Authorizer, OAuthProvider, TokenVault
    from actors.tls import ClientTls

_log = get_logger("actors.transports.http")

_CLIENT_CLOSE_S = 2.0


class RemoteTransport(Transport):
    """The Transport the actor holds for a remote server: the chosen transport, swapped
    once for legacy HTTP+SSE if ``auto`` finds an old server. Requests are tasks of
    their own, so nothing is written at once; Streamable HTTP opens the per-request
    era's listen stream itself (legacy HTTP+SSE never speaks that era)."""

    abilities = Abilities(listens=True)

    def __init__(
        self,
        link: RemoteLink,
        current: StreamableHttpTransport | LegacySseTransport,
        *,
        authenticated: bool = False,
    ) -> None:
        self._link = link
        self._current = current
        self._authenticated = authenticated  # the credentials were readied before connecting

    @property
    def current(self) -> StreamableHttpTransport | LegacySseTransport:
        return self._current

    async def send(self, messages: Sequence[Message]) -> None:
        current = self._current
        if isinstance(current, LegacySseTransport):
            await current.send(messages)
            return
        try:
            await current.send(messages)
        except FallBack as fallback:
            await self._fall_back(fallback)

    async def _fall_back(self, fallback: FallBack) -> None:
        link = self._link
        _log.info(
            "initialize answered HTTP %d: trying the HTTP+SSE transport",
            fallback.status,
            extra=link.log_fields,
        )
        try:
            legacy = await LegacySseTransport.connect(link, after_status=fallback.status)
        except TransportError as exc:
            link.inbox.fail(exc)
            return
        self._current = legacy
        await legacy.send(fallback.messages)

    async def receive(self) -> list[Message]:
        """The next messages; raises the first failure (never returns ``[]``)."""
        return await self._link.inbox.get()

    async def authenticate(self) -> None:
        """The actor's ``authenticate`` state: have an OAuth token ready (stored,
        refreshed, or from the client-credentials grant); nothing for other servers."""
        if self._link.auth is not None and not self._authenticated:
            await self._link.auth.prepare()

    def stderr_tail(self) -> list[str]:
        return []

    def describe(self) -> str:
        return self._current.describe()


@asynccontextmanager
async def open_remote_transport(
    spec: ServerSpec, *, redactor: Redactor | None = None, auth: OAuthProvider | None = None
) -> AsyncIterator[RemoteTransport]:
    """Connect to ``spec.url`` with the configured transport; leaving the block tears
    the connection down. An exception raised in the block comes out as itself."""
    _check_spec(spec)
    redactor = redactor if redactor is not None else Redactor(spec.secrets)
    client = new_client(spec)
    remote: RemoteTransport | None = None
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            link = RemoteLink(spec, client, nursery, Inbox(), redactor, auth)
            try:
                current: StreamableHttpTransport | LegacySseTransport
                if spec.transport == "sse":
                    if auth is not None:  # the stream opens before the actor's authenticate step
                        await auth.prepare()
                    current = await LegacySseTransport.connect(link)
                else:
                    current = StreamableHttpTransport(link, may_fall_back=spec.transport == "auto")
                remote = RemoteTransport(link, current, authenticated=spec.transport == "sse")
                yield remote
            except BaseException as exc:
                body_error = exc  # re-raised below, outside the nursery, unwrapped
            finally:
                nursery.cancel_scope.cancel()
    finally:
        # Also when cancelled from outside: then the nursery above re-raises its tasks'
        # Cancelled as a group, and only a finally still gets to say goodbye.
        with trio.CancelScope(shield=True):
            if remote is not None:
                with trio.move_on_after(max(spec.shutdown_grace_s, 0.1)):
                    await remote.current.end_session()
            with trio.move_on_after(_CLIENT_CLOSE_S):
                await client.aclose()
    if body_error is not None:
        raise body_error


def _check_spec(spec: ServerSpec) -> None:
    """What the loader already checks, again for specs built by hand."""
    try:
        scheme = httpx2.URL(spec.url or "").scheme
    except (httpx2.InvalidURL, ValueError):
        scheme = ""
    if scheme not in ("http", "https"):
        raise TransportError(f"mcp server {spec.name}: a remote server needs an http:// or https:// url")
    if spec.transport not in TRANSPORT_CHOICES:
        choices = ", ".join(TRANSPORT_CHOICES)
        raise TransportError(f"mcp server {spec.name}: unknown transport {spec.transport!r}; use {choices}")


class RemoteConnector:
    """Connector for ``type: remote`` servers; ``redactor_factory`` as for stdio.

    Servers with an ``oauth`` block get one :class:`OAuthProvider` each, kept across
    reconnects (its tokens live in ``vault``: the store, or memory when embedding
    without a state directory); ``authorizer`` gets a person's consent when the
    authorization-code flow needs one (none: the server waits in ``needs_auth``);
    ``subject_token``, for one person's connections, gives the token they signed in to
    us with, for token exchange.
    """

    def __init__(
        self,
        redactor_factory: Callable[[ServerSpec], Redactor] | None = None,
        *,
        vault: TokenVault | None = None,
        authorizer: Authorizer | None = None,
        subject_token: Callable[[], str | None] | None = None,
    ) -> None:
        self._redactor_factory = redactor_factory
        self._vault = vault
        self._authorizer = authorizer
        self._subject_token = subject_token
        self._providers: dict[tuple[str, str, ClientTls | None], OAuthProvider] = {}

    def provider(self, spec: ServerSpec) -> OAuthProvider | None:
        """The server's OAuth provider (made on first use), or None without ``oauth``."""
        if spec.oauth is None or spec.url is None:
            return None
        key = (spec.name, spec.url, spec.tls)  # a reloaded tls block needs a new client
        provider = self._providers.get(key)
        if provider is None:
            from actors.auth.http import tls_transport
            from actors.auth.provider import MemoryVault, OAuthProvider, OAuthSettings

            if self._vault is None:
                self._vault = MemoryVault()
            provider = OAuthProvider(
                spec.name,
                spec.url,
                OAuthSettings.from_mapping(spec.oauth),
                self._vault,
                self._authorizer,
                timeout_s=min(spec.init_timeout_s, 30.0),
                transport=tls_transport(spec.name, spec.tls),
                subject_token=self._subject_token,
            )
            self._providers[key] = provider
        return provider

    def __call__(self, spec: ServerSpec) -> AbstractAsyncContextManager[RemoteTransport]:
        redactor = self._redactor_factory(spec) if self._redactor_factory is not None else None
        return open_remote_transport(spec, redactor=redactor, auth=self.provider(spec))


if TYPE_CHECKING:  # mypy proves the connector satisfies the protocol in base.py
    _connector: Connector = RemoteConnector()
