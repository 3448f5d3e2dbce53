"""The HTTP edge shared by the remote transports: decisions, errors, one client.

Both remote transports (Streamable HTTP and legacy HTTP+SSE) talk through a
:class:`RemoteLink`: one pooled ``httpx2.AsyncClient`` per connection, the nursery its
stream tasks run in, and the :class:`Inbox` of decoded messages the actor reads. Everything httpx raises
is mapped in :meth:`RemoteLink.mapped` (``http_errors.py``), and nowhere else (httpcore's habit).

What a status code means is decided apart from the I/O, by the pure functions in
``http_status.py`` (a table, tested as one); this module carries the decisions out
and words the errors.

Error texts name the server and never carry a header value, a session id or a URL's
query string; they pass the spec's redactor as a last guard.

The error tree adds one leaf to ``base.py``'s: ``TransportClosed → Unreachable``
(``http_errors.py``), a connection that could not even be opened.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import httpx2
import orjson
import trio

from actors.auth.discovery import parse_challenge
from actors.log_events import get_logger
from actors.protocol.errors import ProtocolError
from actors.protocol.http_framing import USER_AGENT
from actors.protocol.messages import INTERNAL_ERROR, ErrorObject, ErrorResponse, Message, RequestId
from actors.protocol.sse import ServerSentEvent, SSEParser
from actors.redaction import Redactor, safe_url
from actors.spec import ServerSpec
from actors.tls import server_context
from actors.transport_errors import AuthRequired, TransportClosed, TransportError
from actors.transports.http_errors import Mapped
from actors.transports.http_status import Next
from actors.transports.one_write import send_requests_in_one_write

if TYPE_CHECKING:
    from actors.auth.provider import OAuthProvider

_log = get_logger("actors.transports.http")

ACCEPT_POST = "application/json, text/event-stream"
ACCEPT_SSE = "text/event-stream"
SESSION_HEADER = "Mcp-Session-Id"
PROTOCOL_VERSION_HEADER = "MCP-Protocol-Version"
LAST_EVENT_ID = "Last-Event-ID"
TRANSPORT_CHOICES = ("auto", "streamable-http", "sse")

MAX_BODY_BYTES = 8 * 1024 * 1024  # as the stdio framing's longest line
_REFUSAL_BODY_BYTES = 64 * 1024
_CLOSE_S = 2.0
_INBOX_SIZE = 64


class FallBack(Exception):
    """Internal signal: an ``auto`` initialize POST was answered the way servers of
    the old HTTP+SSE transport answer; ``messages`` are the ones to replay there."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.messages: list[Message] = []


def content_type(response: httpx2.Response) -> str:
    """The media type alone, lower case (``text/event-stream``)."""
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


def error_answer(
    request_id: RequestId | None, message: str, code: int = INTERNAL_ERROR, data: Any = None
) -> ErrorResponse:
    """A JSON-RPC error answering one of our requests that the server refused at the
    HTTP level, so the caller gets an answer instead of a wait."""
    return ErrorResponse(request_id, ErrorObject(code, message, data))


class Inbox:
    """Decoded server messages for the actor's reader, then the first failure.

    Every task of a remote transport puts into it what one body or one event held;
    ``get`` hands the buffered messages out first and then raises the failure (an
    I/O error, or the ProtocolError of a frame that did not decode), so nothing the
    server said is lost and nothing waits for a timeout once the connection is known
    to be dead.
    """

    def __init__(self, size: int = _INBOX_SIZE) -> None:
        self._send, self._receive = trio.open_memory_channel[list[Message]](size)
        self._failure: TransportError | ProtocolError | None = None

    @property
    def failed(self) -> bool:
        return self._failure is not None

    async def put(self, messages: list[Message]) -> None:
        """Queue messages; dropped silently once the inbox failed (nobody will read them)."""
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            await self._send.send(messages)

    def fail(self, error: TransportError | ProtocolError) -> None:
        """Record the first failure; the reader raises it after the buffered messages."""
        if self._failure is None:
            self._failure = error
            self._send.close()

    async def get(self) -> list[Message]:
        """The next messages: what one body or event held, and whatever else is
        queued already (read together, as one read of a pipe)."""
        try:
            messages = await self._receive.receive()
        except trio.EndOfChannel:
            assert self._failure is not None
            raise self._failure from None
        while True:
            try:
                messages = messages + self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return messages


def new_client(spec: ServerSpec) -> httpx2.AsyncClient:
    """One pooled client per connection; the spec's static headers go on every request,
    and its ``tls`` block (mutual TLS) on every connection."""
    headers = {"User-Agent": USER_AGENT, **spec.headers}
    tls = server_context(spec.name, spec.tls)
    try:
        client = httpx2.AsyncClient(
            headers=headers,
            follow_redirects=False,
            timeout=spec.call_timeout_s,
            verify=True if tls is None else tls,
        )
    except (UnicodeError, ValueError) as exc:
        raise TransportError(
            f"mcp server {spec.name}: a configured header cannot be sent over HTTP "
            "(names and values must be ASCII); fix the server's headers"
        ) from exc
    send_requests_in_one_write(client)
    return client


@attrs.define(eq=False)
class RemoteLink:
    """What one remote connection's tasks share; owned by the remote connector."""

    spec: ServerSpec
    client: httpx2.AsyncClient
    nursery: trio.Nursery  # the connector's; stream tasks run here and end at teardown
    inbox: Inbox
    redactor: Redactor
    auth: OAuthProvider | None = None  # servers with an ``oauth`` block
    # Has the server answered anything yet? A hang-up before that, over https, is how
    # many servers refuse a client certificate (``tls.hang_up_hint``).
    answered: bool = False
    _parsed_url: httpx2.URL | None = attrs.field(init=False, default=None)
    _timeouts: dict[float | None, httpx2.Timeout] = attrs.field(init=False, factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def url(self) -> str:
        assert self.spec.url is not None
        return self.spec.url

    @property
    def safe_url(self) -> str:
        return safe_url(self.url)

    @property
    def log_fields(self) -> dict[str, Any]:
        return {"fields": {"server": self.name}}

    @property
    def request_bound_s(self) -> float:
        """How long a request's answer may stream: past this the actor gave up long ago."""
        return self.spec.max_call_timeout_s + self.spec.ping_timeout_s

    def mapped(self, doing: str) -> Mapped:
        """httpx's errors become ours, with texts that name the server and the step."""
        return Mapped(self, doing)

    async def open(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        doing: str,
        *,
        content: bytes | None = None,
        read_timeout: float | None = None,
        head_timeout: float | None = None,
    ) -> httpx2.Response:
        """:meth:`open_once`, with OAuth: the bearer token on the request; a 401 renews
        the token (refresh, or the whole flow) and the request is retried **once** — a
        second 401 is ``authentication failed`` with ``needs_login``; a 403
        ``insufficient_scope`` steps the scope up, also once per request. A DPoP-bound
        token goes with a fresh proof; a 401 ``use_dpop_nonce`` is retried once with the
        server's nonce (RFC 9449 §9)."""

        def send(sent: dict[str, str]) -> Awaitable[httpx2.Response]:
            return self.open_once(
                method, url, sent, doing,
                content=content, read_timeout=read_timeout, head_timeout=head_timeout,
            )  # fmt: skip

        auth = self.auth
        if auth is None:
            return await send(headers)
        renewed = stepped_up = nonce_retried = False
        if auth.expired():
            await auth.renew()
        while True:
            used = auth.authorization()
            sent = headers if used is None else {**headers, "Authorization": used, **auth.proof(method, url)}
            response = await send(sent)
            status = response.status_code
            challenge = response.headers.get("www-authenticate")
            nonce = response.headers.get("dpop-nonce")
            if auth.dpop_nonce(url, nonce, status, challenge) and not nonce_retried:
                await self.close(response)
                nonce_retried = True  # DPoP: the server wants its nonce in the proof; once
                continue
            if status == 401:
                await self.close(response)
                if renewed:
                    auth.refused()
                    raise AuthRequired(
                        self.name, 401, detail=f"{doing} was refused with a fresh token", needs_login=True
                    )
                renewed = True
                await auth.unauthorized(used, challenge)
                continue
            if status == 403 and (parsed := parse_challenge(challenge)) and parsed.insufficient_scope:
                await self.close(response)
                if stepped_up:
                    raise AuthRequired(
                        self.name, 403, detail=f"{doing} needs more scope than was granted", needs_login=True
                    )
                stepped_up = True
                await auth.insufficient_scope(used, challenge)
                continue
            if used is not None and status < 400:
                auth.succeeded()
            return response

    async def open_once(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        doing: str,
        *,
        content: bytes | None = None,
        read_timeout: float | None = None,
        head_timeout: float | None = None,
    ) -> httpx2.Response:
        """Send a request and return once the response head arrived (body unread).

        ``read_timeout`` None: streams may be silent for long; their tasks are bounded
        by cancel scopes instead. ``head_timeout`` still bounds the wait for the
        status line of such a stream (a GET must not hang before it even started).
        """
        timeout = self._timeouts.get(read_timeout)
        if timeout is None:
            spec = self.spec
            timeout = self._timeouts[read_timeout] = httpx2.Timeout(
                connect=min(spec.init_timeout_s, spec.call_timeout_s),
                read=read_timeout,
                write=spec.call_timeout_s,
                pool=spec.call_timeout_s,
            )
        if url == self.spec.url:  # parsed once: the endpoint of nearly every request
            if self._parsed_url is None:
                with self.mapped(doing):
                    self._parsed_url = httpx2.URL(url)
            target: httpx2.URL | str = self._parsed_url
        else:
            target = url
        with self.mapped(doing):
            client = self.client
            request = client.build_request(method, target, headers=headers, content=content, timeout=timeout)
            if head_timeout is None:
                response = await client.send(request, stream=True)
                self.answered = True
                return response
            with trio.move_on_after(head_timeout):
                response = await client.send(request, stream=True)
                self.answered = True
                return response
        raise TransportClosed(f"mcp server {self.name} did not answer {doing} within {head_timeout:g} s")

    async def close(self, response: httpx2.Response) -> None:
        """Release a response's connection, also under cancellation (shielded, bounded);
        nothing to do for one whose body was read to its end (httpx closed it then)."""
        if response.is_closed:
            return
        with (
            trio.CancelScope(shield=True),
            trio.move_on_after(_CLOSE_S),
            contextlib.suppress(httpx2.HTTPError),
        ):
            await response.aclose()

    async def read_body(self, response: httpx2.Response, doing: str, limit: int = MAX_BODY_BYTES) -> bytes:
        """The whole body, refusing more than ``limit`` bytes."""
        chunks: list[bytes] = []
        size = 0
        with self.mapped(doing):
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise TransportError(f"mcp server {self.name} answered {doing} with over {limit} bytes")
                chunks.append(chunk)
        return b"".join(chunks)

    async def pump(
        self,
        response: httpx2.Response,
        parser: SSEParser,
        handle: Callable[[ServerSentEvent], Awaitable[bool]],
        doing: str,
        *,
        drain_s: float = 0.0,
    ) -> bool:
        """Feed an SSE body through ``parser`` into ``handle`` until it returns True
        (then True) or the stream ends (then False).

        ``drain_s``: after ``handle`` returned True, go on reading (and handling) for
        up to that long, until the stream ends. A server closes a request's stream
        right after its answer; read to that end, the HTTP connection goes back to
        the pool, where a stream cut short would close it and cost the next request
        a new TCP connection."""
        chunks = response.aiter_bytes()
        answered = False
        drain = trio.CancelScope()
        try:
            with self.mapped(doing), drain:
                async for chunk in chunks:
                    for event in parser.feed(chunk):
                        if await handle(event) and not answered:
                            answered = True
                            if drain_s <= 0:
                                return True
                            drain.deadline = trio.current_time() + drain_s
                for event in parser.close():
                    if await handle(event):
                        answered = True
            return answered
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                with trio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await aclose()

    def status_error(self, step: Next, status: int, doing: str) -> TransportError:
        """The error for a status that ends the connection (texts carry no header values)."""
        if step is Next.AUTH_FAILED:
            return AuthRequired(self.name, status)
        if step is Next.SESSION_EXPIRED:
            return TransportClosed(
                f"mcp server {self.name} ended the session (HTTP 404 on {doing}); "
                "the next connection starts a new one"
            )
        text = f"mcp server {self.name} answered {doing} with HTTP {status}"
        if step is Next.REDIRECTED:
            return TransportError(f"{text} (a redirect, not followed); set url to the final MCP endpoint")
        if step is Next.SERVER_ERROR:
            return TransportError(f"{text} (server error)")
        if doing == "initialize" and status in (400, 404, 405):
            return TransportError(
                f'{text}; if it only speaks the older HTTP+SSE transport, set "transport": "sse" or "auto"'
            )
        return TransportError(text)

    def refusal(self, status: int, doing: str, detail: str) -> str:
        return f"mcp server {self.name} answered {doing} with HTTP {status} ({detail})"

    async def refused_answer(
        self, response: httpx2.Response, request_id: RequestId | None, doing: str
    ) -> ErrorResponse:
        """The answer for a request refused with a 4xx: the JSON-RPC error in the body
        if there is one (given this request's id), else one made from the status."""
        status = response.status_code
        with contextlib.suppress(TransportError, orjson.JSONDecodeError):
            body = orjson.loads(await self.read_body(response, doing, _REFUSAL_BODY_BYTES))
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                code = error.get("code")
                code = code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR
                # data stays: a -32022 names the versions the server speaks there
                return error_answer(
                    request_id, self.redactor.redact(error["message"]), code, error.get("data")
                )
        return error_answer(request_id, self.refusal(status, doing, "refused"))
