"""A server behind a WebSocket bridge (``type: websocket``): one bridge session per connection.

The hub (another supervisor's ``/v1/bridge``, or any hub that speaks the envelope of
``actors/protocol/bridge_envelope.py``) runs a dedicated process of the server for
each session and passes raw JSON-RPC through. So this transport only moves messages:
the connection actor above it speaks MCP (either era), with the same states, schedule,
trust and validation as for any server.

Lifetime, all inside :func:`open_websocket_transport` (the actor's init timeout
bounds the first two steps):

1. Connect to ``spec.url``, the token in the handshake's ``Authorization: Bearer``
   header (the config's ``token``, or ``headers``). A refused handshake (HTTP 401/403)
   is :class:`AuthRequired`; any other failure to connect a :class:`TransportClosed`.
2. ``mcp:session:open {serverName}``, then wait for ``mcp:session:open:result``: a
   ``sessionId``, or an error that becomes a TransportError naming the server and
   the hub's reason.
3. *Use*: each message goes as ``mcp:message {sessionId, jsonrpc}``; received ones for
   our session are decoded once. The link is dead, and ``receive`` raises at once
   (so every call in flight is answered ``unavailable``), when the socket drops, the
   hub sends ``mcp:session:close`` for our session, or an ``mcp:error`` that is ours.
4. *Teardown*, shielded and under ``shutdown_grace_s``: ``mcp:session:close`` (the
   hub then ends the server's process), then the WebSocket close handshake.

The token is a header value: it is never logged, and the URL is shown redacted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio
from trio_websocket import (
    CloseReason,
    ConnectionClosed,
    ConnectionRejected,
    HandshakeError,
    WebSocketConnection,
    open_websocket_url,
)
from wsproto.utilities import LocalProtocolError

from actors.log_events import get_logger
from actors.protocol import bridge_envelope as env
from actors.protocol.errors import FramingError, ProtocolError, Unencodable
from actors.protocol.jsonrpc import parse_message, to_wire
from actors.protocol.messages import Message
from actors.protocol.ndjson import DEFAULT_MAX_LINE_BYTES
from actors.redaction import Redactor
from actors.spec import ServerSpec
from actors.transport_errors import AuthRequired, TransportClosed, TransportError
from actors.transports.base import Connector, Transport

_log = get_logger("actors.transports.websocket")

_OPEN_ID = 1  # the id of our one mcp:session:open on a socket
_MAX_FRAME_BYTES = DEFAULT_MAX_LINE_BYTES  # as large as a stdio line may be
# Close codes that say the hub refused our credentials after accepting the socket.
_AUTH_CLOSE_CODES = {1008, 4401, 4403}
_AUTH_ERROR_CODES = {"unauthorized", "forbidden", "auth_failed"}


class WebSocketTransport(Transport):
    """One bridge session over one WebSocket. Made only by :func:`open_websocket_transport`."""

    def __init__(self, spec: ServerSpec, ws: WebSocketConnection, where: str) -> None:
        self._name = spec.name
        self._server_name = spec.server_name or spec.name
        self._ws = ws
        self._where = where  # the hub's URL, redacted
        self._session_id: str | None = None
        self._closed_by_hub = False

    @property
    def session_id(self) -> str | None:
        return self._session_id

    async def open_session(self) -> None:
        """Ask the hub for a session of the server; raise a TransportError naming the
        server and the hub's reason when it refuses."""
        await self._send_text(env.encode(env.session_open(self._server_name, _OPEN_ID)))
        while True:
            frame = await self._next_frame()
            if frame.type == env.OPEN_RESULT and frame.id == _OPEN_ID:
                break
            if frame.type == env.ERROR and frame.data.get("sessionId") is None:
                raise self._hub_error(frame.data, opening=True)
            _log.debug("ignored a %s frame before the session opened", frame.type, extra=self._fields())
        refused = frame.data.get("error")
        if refused is not None:
            raise self._hub_error(refused if isinstance(refused, dict) else {}, opening=True)
        session_id = frame.data.get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            raise TransportError(
                f"mcp server {self._name}: the bridge at {self._where} answered "
                "mcp:session:open without a sessionId"
            )
        self._session_id = session_id
        _log.info("bridge session opened", extra=self._fields())

    async def send(self, messages: Sequence[Message]) -> None:
        session_id = self._session_id
        assert session_id is not None, "messages are sent only on an open session"
        texts = []
        for message in messages:
            try:
                texts.append(env.encode(env.message(session_id, to_wire(message))))
            except TypeError as exc:  # orjson's JSONEncodeError
                raise Unencodable(message, f"message cannot be encoded as JSON: {exc}") from None
        for text in texts:
            await self._send_text(text)

    async def receive(self) -> list[Message]:
        """The next message(s) of our session; raises when the link is dead."""
        while True:
            frame = await self._next_frame()
            data = frame.data
            ours = data.get("sessionId") == self._session_id
            if frame.type == env.MESSAGE and ours:
                return _messages_of(data.get("jsonrpc"))
            if frame.type == env.CLOSE and ours:
                self._closed_by_hub = True
                said = " ".join(  # the hub's text for people, then its reason code
                    f"{data[key]}" if key == "message" else f"({data[key]})"
                    for key in ("message", "reason")
                    if data.get(key)
                )
                why = f": {said}" if said else ""
                raise TransportClosed(
                    f"mcp server {self._name}: the bridge at {self._where} closed the session{why}"
                )
            if frame.type == env.ERROR and (ours or data.get("sessionId") is None):
                raise self._hub_error(data, opening=False)
            _log.debug("ignored a %s frame", frame.type, extra=self._fields())

    def stderr_tail(self) -> list[str]:
        return []

    def describe(self) -> str:
        session = f" session {self._session_id}" if self._session_id else ""
        return f"{self._where} -> {self._server_name}{session}"

    async def close(self) -> None:
        """End the session (the hub ends the server's process), then the socket."""
        if self._session_id is not None and not self._closed_by_hub:
            with suppress(ConnectionClosed):
                await self._ws.send_message(env.encode(env.session_close(self._session_id)))
        await self._ws.aclose()

    # ------------------------------------------------------------------ helpers

    async def _send_text(self, text: str) -> None:
        try:
            await self._ws.send_message(text)
        except ConnectionClosed as exc:
            raise self._closed(exc.reason) from None
        except LocalProtocolError:  # the hub's close frame came first (trio-websocket#175)
            raise self._closed(self._ws.closed) from None

    async def _next_frame(self) -> env.Frame:
        try:
            text = await self._ws.get_message()
        except ConnectionClosed as exc:
            raise self._closed(exc.reason) from None
        if isinstance(text, bytes):
            raise FramingError("the bridge sent a binary WebSocket message; the envelope is JSON text")
        frame = env.decode(text, _MAX_FRAME_BYTES)
        if isinstance(frame, env.EnvelopeError):
            raise FramingError(f"the bridge sent a frame that is not an envelope: {frame.message}")
        return frame

    def _closed(self, reason: CloseReason | None) -> TransportError:
        code = reason.code if reason is not None else 1006
        said = f": {reason.reason}" if reason is not None and reason.reason else ""
        if self._session_id is None and code in _AUTH_CLOSE_CODES:
            return AuthRequired(
                self._name, 401, detail=f"the bridge at {self._where} closed the socket ({code}{said})"
            )
        name = reason.name if reason is not None else "ABNORMAL_CLOSURE"
        return TransportClosed(
            f"mcp server {self._name}: the bridge at {self._where} closed the connection "
            f"({code} {name}{said})"
        )

    def _hub_error(self, error: Mapping[str, Any], *, opening: bool) -> TransportError:
        code = str(error.get("code", "error"))
        message = str(error.get("message", "no reason given"))
        if code in _AUTH_ERROR_CODES:
            detail = f"the bridge at {self._where} refused {self._server_name!r}: {message}"
            return AuthRequired(self._name, 403, detail=detail)
        what = "refused to open" if opening else "reported an error on the session of"
        return TransportError(
            f"mcp server {self._name}: the bridge at {self._where} {what} {self._server_name!r}: "
            f"{message} ({code})"
        )

    def _fields(self) -> dict[str, Any]:
        return {"server": self._name, "url": self._where, "bridge_session": self._session_id}


def _messages_of(jsonrpc: object) -> list[Message]:
    """The message(s) an ``mcp:message`` carries (a JSON-RPC batch is unpacked)."""
    if isinstance(jsonrpc, list):
        if not jsonrpc:
            raise ProtocolError("empty JSON-RPC batch")
        return [parse_message(item) for item in jsonrpc]
    return [parse_message(jsonrpc)]


@asynccontextmanager
async def open_websocket_transport(
    spec: ServerSpec, *, redactor: Redactor | None = None
) -> AsyncIterator[WebSocketTransport]:
    """Connect to the bridge and open a session of ``spec.server_name``; leaving the
    block closes the session and the socket. An exception raised in the block comes
    out as itself."""
    url = _check_spec(spec)
    redactor = redactor if redactor is not None else Redactor(spec.secrets)
    where = redactor.redact(url)
    headers = [(name.encode(), value.encode()) for name, value in spec.headers.items()]
    grace = max(spec.shutdown_grace_s, 0.1)
    connected = False
    try:
        async with (
            PongsAfterClose() as closing,
            open_websocket_url(
                url,
                extra_headers=headers,
                max_message_size=_MAX_FRAME_BYTES,
                connect_timeout=spec.init_timeout_s,
                disconnect_timeout=grace,
            ) as ws,
        ):
            connected = True
            transport = WebSocketTransport(spec, ws, where)
            try:
                await transport.open_session()
                yield transport
            finally:
                closing.began = True
                with trio.CancelScope(shield=True), trio.move_on_after(grace):
                    await transport.close()
    except ConnectionRejected as exc:
        if connected:
            raise
        raise _rejected(spec, where, exc.status_code) from None
    except HandshakeError as exc:
        if connected:
            raise
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        reason = redactor.redact(str(cause) or type(cause).__name__)
        raise TransportClosed(
            f"mcp server {spec.name}: cannot connect to the bridge at {where}: {reason}"
        ) from None


class PongsAfterClose:
    """trio-websocket (#184, open) answers a ping that arrives after our close frame
    with a pong that wsproto refuses: ``LocalProtocolError`` from its reader task. Once
    our close ``began`` the socket is going anyway, so that error is dropped; before
    it, or with any other error beside it, the errors are kept. Every trio-websocket
    client of ours (this transport, the dial-out bridge peer) wraps its socket in one."""

    began = False

    async def __aenter__(self) -> PongsAfterClose:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or not self.began:
            return False
        if isinstance(exc, LocalProtocolError):
            _log.debug("ignored a pong refused while closing: %s", exc)
            return True
        if isinstance(exc, BaseExceptionGroup):
            rest = exc.split(LocalProtocolError)[1]
            if rest is None:
                _log.debug("ignored a pong refused while closing: %s", exc.exceptions[0])
                return True
            if rest is not exc:
                raise rest from None
        return False


def _rejected(spec: ServerSpec, where: str, status: int) -> TransportError:
    if status in (401, 403):
        has_token = any(name.lower() == "authorization" for name in spec.headers)
        fix = "check the server's 'token'" if has_token else "set the server's 'token'"
        return AuthRequired(
            spec.name, status, detail=f"the bridge at {where} refused the token (HTTP {status}); {fix}"
        )
    return TransportClosed(
        f"mcp server {spec.name}: the bridge at {where} refused the WebSocket (HTTP {status})"
    )


def _check_spec(spec: ServerSpec) -> str:
    """What the loader already checks, again for specs built by hand; the URL."""
    url = spec.url or ""
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = urlsplit("")
    if parts.scheme.lower() not in ("ws", "wss") or not parts.hostname:
        raise TransportError(f"mcp server {spec.name}: a websocket server needs a ws:// or wss:// url")
    return url


class WebSocketConnector:
    """Connector for ``type: websocket`` servers; ``redactor_factory`` as for stdio."""

    def __init__(self, redactor_factory: Callable[[ServerSpec], Redactor] | None = None) -> None:
        self._redactor_factory = redactor_factory

    def __call__(self, spec: ServerSpec) -> AbstractAsyncContextManager[WebSocketTransport]:
        redactor = self._redactor_factory(spec) if self._redactor_factory is not None else None
        return open_websocket_transport(spec, redactor=redactor)


if TYPE_CHECKING:  # mypy proves the connector satisfies the protocol in base.py
    _connector: Connector = WebSocketConnector()
