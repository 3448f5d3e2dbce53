"""The legacy HTTP+SSE transport (MCP 2024-11-05).

HTTP+SSE: GET the server URL for an event stream; its first event, ``endpoint``, names
the URL to POST messages to (it must stay on the server's origin: credentials in the
static headers must not be sent anywhere else). Every server message then arrives as
a ``message`` event on that one GET stream, and its end is the end of the session.

Which of the two transports a remote server gets, and the switch to this one, are
``remote.py``'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urljoin, urlsplit

import httpx2
import trio

from actors.log_events import get_logger
from actors.protocol.errors import ProtocolError
from actors.protocol.http_framing import decode_event, encode_body, what
from actors.protocol.messages import Message, Request
from actors.protocol.sse import ServerSentEvent, SSEParser
from actors.redaction import safe_url
from actors.transport_errors import AuthRequired, TransportClosed, TransportError
from actors.transports.http_link import (
    ACCEPT_SSE,
    RemoteLink,
    content_type,
)
from actors.transports.http_status import GetNext, Next, decide_get, decide_post

if TYPE_CHECKING:
    pass

_log = get_logger("actors.transports.http")

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
