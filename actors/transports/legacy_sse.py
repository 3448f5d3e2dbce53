"""The legacy HTTP+SSE transport (MCP 2024-11-05), and the remote connector that picks
between it and Streamable HTTP.

HTTP+SSE: GET the server URL for an event stream; its first event, ``endpoint``, names
the URL to POST messages to (it must stay on the server's origin: credentials in the
static headers must not be sent anywhere else). Every server message then arrives as
a ``message`` event on that one GET stream, and its end is the end of the session.

Which transport a remote server gets (``ServerSpec.transport``):

- ``streamable-http`` / ``sse``: that one.
- ``auto`` (default): Streamable HTTP; if the first POST, ``initialize``, is answered
  400, 404 or 405 — how servers of the old transport answer, per the spec's
  "backwards compatibility" section — the same URL is tried as an HTTP+SSE stream and
  ``initialize`` is replayed there. The switch happens inside one ``send``, so the
  actor never notices.

Teardown (leaving :func:`open_remote_transport`, also when cancelled): stream tasks
are cancelled, the Streamable HTTP session is DELETEd under its own deadline, and
the pooled client is closed; all shielded.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urljoin, urlsplit

import httpx2
import trio

from actors.connection.spec import ServerSpec
from actors.protocol.errors import ProtocolError
from actors.protocol.http_framing import decode_event, encode_body
from actors.protocol.messages import Message, Request
from actors.protocol.sse import ServerSentEvent, SSEParser
from actors.redaction import Redactor, safe_url
from actors.transports.base import AuthRequired, Connector, Transport, TransportClosed, TransportError
from actors.transports.http_link import (
    ACCEPT_SSE,
    TRANSPORT_CHOICES,
    FallBack,
    GetNext,
    Inbox,
    Next,
    RemoteLink,
    content_type,
    decide_get,
    decide_post,
    new_client,
)
from actors.transports.streamable_http import StreamableHttpTransport, what

if TYPE_CHECKING:
    from actors.auth.provider import Authorizer, OAuthProvider, TokenVault

_log = logging.getLogger("actors.transports.http")

_DEFAULT_PORTS = {"http": 80, "https": 443}
_CLIENT_CLOSE_S = 2.0


def resolve_endpoint(base_url: str, announced: str) -> str:
    """The absolute POST URL for an ``endpoint`` event; ValueError if it leaves the
    origin (scheme, host, port) of ``base_url``."""
    joined = urljoin(base_url, announced.strip())
    base, target = urlsplit(base_url), urlsplit(joined)

    def origin(parts: SplitResult) -> tuple[str, str | None, int | None]:
        scheme = parts.scheme.lower()
        return scheme, parts.hostname, parts.port or _DEFAULT_PORTS.get(scheme)

    if origin(base) != origin(target):
        raise ValueError(f"endpoint {safe_url(joined)} is not on the server's origin")
    return joined


class LegacySseTransport:
    """One MCP session over HTTP+SSE; made by :meth:`connect`, which waits for the
    ``endpoint`` event."""

    def __init__(self, link: RemoteLink, endpoint: str) -> None:
        self._link = link
        self.endpoint = endpoint

    @classmethod
    async def connect(cls, link: RemoteLink, *, after_status: int | None = None) -> LegacySseTransport:
        """Open the GET stream in the link's nursery; return once ``endpoint`` arrived.

        ``after_status``: the Streamable HTTP status that led here (auto fallback),
        named in the error if this fails too.
        """
        endpoint: str = await link.nursery.start(_run_stream, link, after_status)
        return cls(link, endpoint)

    def describe(self) -> str:
        return f"sse {safe_url(self._link.url)}"

    async def send(self, messages: Sequence[Message]) -> None:
        """POST each message to the endpoint; answers arrive on the GET stream.
        Unencodable (nothing sent) if a message cannot be encoded."""
        bodies = [encode_body(message) for message in messages]
        for message, body in zip(messages, bodies, strict=True):
            if self._link.inbox.failed:
                return
            try:
                await self._post(message, body)
            except TransportError as exc:
                self._link.inbox.fail(exc)
                return

    async def _post(self, message: Message, body: bytes) -> None:
        link = self._link
        doing = what(message)
        response = await link.open(
            "POST", self.endpoint, {"Content-Type": "application/json"}, doing, content=body,
            read_timeout=link.spec.call_timeout_s,
        )  # fmt: skip
        try:
            status = response.status_code
            step = decide_post(status, initialize=False, has_session=True)
            if step is Next.REFUSED:
                if isinstance(message, Request):
                    await link.inbox.put([await link.refused_answer(response, message.id, doing)])
            elif step not in (Next.ACCEPTED, Next.READ_BODY):
                raise link.status_error(step, status, doing)
        finally:
            await link.close(response)

    async def end_session(self) -> None:
        """Nothing to do: closing the GET stream ends an HTTP+SSE session."""


async def _run_stream(
    link: RemoteLink,
    after_status: int | None,
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Task: the GET stream. Errors before ``endpoint`` are raised to ``connect``;
    after it, they (and the stream's end) fail the inbox."""
    endpoint: str | None = None
    response = await link.open(
        "GET", link.url, {"Accept": ACCEPT_SSE}, "the HTTP+SSE stream", head_timeout=link.spec.init_timeout_s
    )
    waiting = trio.CancelScope(deadline=trio.current_time() + link.spec.init_timeout_s)

    async def handle(event: ServerSentEvent) -> bool:
        nonlocal endpoint
        if endpoint is None:
            if event.event == "endpoint":
                try:
                    endpoint = resolve_endpoint(link.url, event.data)
                except ValueError as exc:
                    raise TransportError(f"mcp server {link.name}: refused the HTTP+SSE {exc}") from exc
                waiting.deadline = math.inf
                task_status.started(endpoint)
            return False
        messages = decode_event(event)
        if messages:
            await link.inbox.put(messages)
        return False

    try:
        _check_stream(link, response, after_status)
        with waiting:
            await link.pump(response, SSEParser(), handle, "the HTTP+SSE stream")
        if endpoint is None:
            what = "did not send" if waiting.cancelled_caught else "closed the stream without"
            raise TransportError(
                f"mcp server {link.name} {what} the HTTP+SSE endpoint event"
                + (f" within {link.spec.init_timeout_s:g} s" if waiting.cancelled_caught else "")
            )
        raise TransportClosed(f"mcp server {link.name} closed its HTTP+SSE stream")
    except (TransportError, ProtocolError) as exc:
        if endpoint is None:
            raise
        link.inbox.fail(exc)
    finally:
        await link.close(response)


def _check_stream(link: RemoteLink, response: httpx2.Response, after_status: int | None) -> None:
    """Is this GET answer an event stream? If not, say why in the user's terms."""
    status = response.status_code
    kind = content_type(response)
    step = decide_get(status, reopening=False, has_session=False)
    if step is GetNext.AUTH_FAILED:
        raise AuthRequired(link.name, status)
    if step is GetNext.LISTEN and kind == "text/event-stream":
        return
    got = f"HTTP {status}" + (f" ({kind})" if kind else "")
    if after_status is None:
        raise TransportError(
            f"mcp server {link.name}: GET {link.safe_url} answered {got}, not an HTTP+SSE stream; "
            'check the url, or set "transport": "streamable-http"'
        )
    raise TransportError(
        f"mcp server {link.name}: {link.safe_url} speaks neither Streamable HTTP (initialize was "
        f"answered HTTP {after_status}) nor HTTP+SSE (GET answered {got}); check the url"
    )


class RemoteTransport(Transport):
    """The Transport the actor holds for a remote server: the chosen transport, swapped
    once for legacy HTTP+SSE if ``auto`` finds an old server. No abilities beyond the
    contract: requests are tasks of their own, so nothing is written at once."""

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
    authorization-code flow needs one (none: the server waits in ``needs_auth``).
    """

    def __init__(
        self,
        redactor_factory: Callable[[ServerSpec], Redactor] | None = None,
        *,
        vault: TokenVault | None = None,
        authorizer: Authorizer | None = None,
    ) -> None:
        self._redactor_factory = redactor_factory
        self._vault = vault
        self._authorizer = authorizer
        self._providers: dict[tuple[str, str], OAuthProvider] = {}

    def provider(self, spec: ServerSpec) -> OAuthProvider | None:
        """The server's OAuth provider (made on first use), or None without ``oauth``."""
        if spec.oauth is None or spec.url is None:
            return None
        key = (spec.name, spec.url)
        provider = self._providers.get(key)
        if provider is None:
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
            )
            self._providers[key] = provider
        return provider

    def __call__(self, spec: ServerSpec) -> AbstractAsyncContextManager[RemoteTransport]:
        redactor = self._redactor_factory(spec) if self._redactor_factory is not None else None
        return open_remote_transport(spec, redactor=redactor, auth=self.provider(spec))


if TYPE_CHECKING:  # mypy proves the connector satisfies the protocol in base.py
    _connector: Connector = RemoteConnector()
