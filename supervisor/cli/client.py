"""A small synchronous client for the admin API, used by the CLI commands.

The routes it calls are those of ``supervisor/admin/openapi.py``; the CLI never loads a
config or starts servers, it only talks to a running service.

Why ``http.client`` and synchronous: ``mcp-supervisor status`` and friends are
short-lived processes that make a handful of loopback requests; the stdlib client
starts fast and needs no event loop. A call's event stream is parsed by the project's
one SSE parser (``actors/protocol/sse.py``, pure), as the HTTP transports do.

Why one connection per request: the CLI makes at most five requests, and a fresh
connection is what lets us still delete the session (or cancel the request) after a
Ctrl-C interrupted a half-read event stream on the old one.

Secrets: the token only ever goes into the ``Authorization`` header. It is checked
before use (an invalid header value makes ``http.client`` raise an error *quoting the
value*), it never appears in an exception message (the service's own error texts are
scrubbed of it as a second line of defence), and URLs are shown without user info.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from actors.protocol.sse import ServerSentEvent, SSEError, iter_events

DEFAULT_URL = "http://127.0.0.1:8765"
URL_ENV_VAR = "MCP_SUPERVISOR_URL"
TOKEN_ENV_VAR = "MCP_SUPERVISOR_TOKEN"
DEFAULT_TIMEOUT_S = 10.0
USER_AGENT = "mcp-supervisor-cli/0.1"
_EVENT_STREAM = "text/event-stream"
_READ_SIZE = 65536
# The longest line or event of a call's stream. The service's largest event is a
# call's result envelope, built from one server message (at most 8 MiB, whose text
# the envelope carries twice: as "text" and in "content"), so a real answer stays far
# below this bound; it only stops a stream that is not the service's from growing
# memory without end.
MAX_CALL_EVENT_CHARS = 64 * 1024 * 1024


class UsageError(ValueError):
    """A bad ``--url`` or ``--token``: the caller's mistake, reported with exit status 2."""


class ClientError(Exception):
    """Anything that stopped a request from getting a usable answer (exit status 1)."""


class Unreachable(ClientError):
    """No connection to the service at all: the usual case is that it is not running."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(
            f'cannot reach the supervisor at {url}: {reason}; is "mcp-supervisor serve" running?'
        )
        self.url = url
        self.reason = reason


class Unauthorized(ClientError):
    """401: the token is missing or wrong; the message says where a token comes from."""


class ApiError(ClientError):
    """The service answered with an error status (and its ``Error`` body,
    ``{"error": {"code", "message"}}``)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{message} (HTTP {status}, {code})")
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Reply:
    """A decoded JSON answer. ``text`` is the body exactly as served, so that ``--json``
    can print the service's own document rather than our re-encoding of it."""

    status: int
    text: str
    data: Any


@dataclass(frozen=True)
class Turn:
    """What ``POST /v1/sessions/{sid}/turns`` answered."""

    turn_id: str
    epoch: int | None
    tools: list[Any]
    search_enabled: bool

    def lists(self, tool_id: str) -> bool:
        """Whether the turn's tool list names ``tool_id`` (entries are ids or objects)."""
        for entry in self.tools:
            if entry == tool_id:
                return True
            if isinstance(entry, dict) and tool_id in (entry.get("id"), entry.get("name")):
                return True
        return False


@dataclass(frozen=True)
class CallResult:
    """The result envelope of a call (``actors/router/envelope.py``) and its JSON text as
    the service sent it."""

    envelope: dict[str, Any]
    text: str


# ---------------------------------------------------------------- the client


def display_url(url: str) -> str:
    """``url`` without user info, for messages: a ``user:password@`` must not leak."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None else f"{host}:{port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def check_token(token: str | None) -> str | None:
    """The token to send, or None; raises UsageError (without quoting it) when it cannot
    be a header value. Surrounding whitespace is dropped: tokens pasted from files often
    carry a newline."""
    if token is None:
        return None
    token = token.strip()
    if not token:
        return None
    if not all(" " <= char <= "~" for char in token):
        raise UsageError("the token contains characters that cannot be sent in an HTTP header")
    return token


def _reason(exc: BaseException, host: str, timeout: float) -> str:
    """A short human reason for a failed connect."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host {host!r}"
    if isinstance(exc, TimeoutError):
        return f"no connection within {timeout:g}s"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed: {exc.reason or exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__


class AdminClient:
    """Talks to one running service. Every method raises ClientError (or a subclass) for
    anything but a usable answer, so the CLI can report it in one line."""

    def __init__(self, url: str, token: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--url {display_url(url) or url!r}: expected http://HOST:PORT")
        try:
            self._port = parts.port
        except ValueError:
            raise UsageError(f"--url {display_url(url)}: bad port") from None
        if timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._prefix = parts.path.rstrip("/")
        self._token = check_token(token)
        self.timeout = timeout
        self.url = display_url(url)

    # -- plumbing

    def _scrub(self, text: str) -> str:
        """``text`` with the token blanked: the service should never echo it, but if it
        did, the CLI would print it to a terminal or a CI log."""
        return text.replace(self._token, "***") if self._token else text

    def _connect(self, timeout: float | None) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _headers(self, accept: str, has_body: bool) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": USER_AGENT}
        if has_body:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        return headers

    def _send(
        self,
        method: str,
        path: str,
        body: object | None,
        accept: str,
        read_timeout: float | None,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Connect and send; the caller owns (and must close) the connection."""
        payload = None if body is None else json.dumps(body).encode()
        conn = self._connect(self.timeout)
        try:
            try:
                conn.request(method, self._prefix + path, payload, self._headers(accept, payload is not None))
            except (OSError, http.client.HTTPException) as exc:
                raise Unreachable(self.url, self._scrub(_reason(exc, self._host, self.timeout))) from None
            if conn.sock is not None:
                conn.sock.settimeout(read_timeout)
            return conn, self._response(conn, read_timeout)
        except BaseException:
            conn.close()
            raise

    def _response(
        self, conn: http.client.HTTPConnection, read_timeout: float | None
    ) -> http.client.HTTPResponse:
        try:
            return conn.getresponse()
        except TimeoutError:
            raise ClientError(
                f"no answer from the supervisor at {self.url} within {read_timeout:g}s"
            ) from None
        except http.client.RemoteDisconnected:
            raise ClientError(
                f"the supervisor at {self.url} closed the connection without answering"
            ) from None
        except http.client.BadStatusLine:
            raise ClientError(
                f"{self.url} did not answer in HTTP; is it the supervisor's admin address?"
            ) from None
        except OSError as exc:
            raise ClientError(f"the connection to {self.url} failed: {_reason(exc, self._host, 0)}") from None

    def _read(self, response: http.client.HTTPResponse, read_timeout: float | None) -> bytes:
        try:
            return response.read()
        except TimeoutError:
            raise ClientError(
                f"no answer from the supervisor at {self.url} within {read_timeout:g}s"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise ClientError(f"the answer from {self.url} was cut off: {type(exc).__name__}") from None

    def _raise_for_status(self, status: int, reason: str, raw: bytes) -> None:
        if 200 <= status < 300:
            return
        code, message = f"http_{status}", f"HTTP {status} {reason}".strip()
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            error = json.loads(raw)["error"]
            code = str(error.get("code") or code)
            message = str(error.get("message") or message)
        message = self._scrub(message)
        if status == 401:
            if self._token:
                hint = "the token was not accepted; check --token or $" + TOKEN_ENV_VAR
            else:
                hint = "a token is required; pass one with --token or $" + TOKEN_ENV_VAR
            raise Unauthorized(f"the supervisor at {self.url} refused the request (401): {hint}")
        raise ApiError(status, self._scrub(code), message)

    def request(self, method: str, path: str, body: object | None = None) -> Reply:
        """One JSON request; the answer's JSON (None for an empty body, e.g. a 204)."""
        conn, response = self._send(method, path, body, "application/json", self.timeout)
        try:
            raw = self._read(response, self.timeout)
        finally:
            conn.close()
        self._raise_for_status(response.status, response.reason, raw)
        text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            return Reply(response.status, text, None)
        try:
            data = json.loads(text)
        except ValueError:
            raise ClientError(
                f"{self.url} answered {method} {path} with something that is not JSON; "
                "is it the supervisor's admin address?"
            ) from None
        return Reply(response.status, text, data)

    # -- the routes (``supervisor/admin/openapi.py`` has them all)

    def servers(self) -> Reply:
        """``GET /v1/servers``."""
        return self.request("GET", "/v1/servers")

    def tools(self) -> Reply:
        """``GET /v1/tools``."""
        return self.request("GET", "/v1/tools")

    def open_session(self) -> str:
        """``POST /v1/sessions``: the new session's id."""
        data = self.request("POST", "/v1/sessions", {}).data
        sid = data.get("session_id") if isinstance(data, dict) else None
        if not isinstance(sid, str) or not sid:
            raise ClientError(f"the supervisor at {self.url} answered POST /v1/sessions without a session_id")
        return sid

    def delete_session(self, sid: str) -> None:
        """``DELETE /v1/sessions/{sid}``."""
        self.request("DELETE", f"/v1/sessions/{_quote(sid)}")

    @contextlib.contextmanager
    def session(self, on_delete_error: Callable[[str, ClientError], None] | None = None) -> Iterator[str]:
        """A session that is deleted on the way out, whatever the way out is (an error,
        Ctrl-C): a CLI run must not leave sessions behind in a long-running service.
        A failed delete is reported through ``on_delete_error`` and does not hide the
        error that ended the block."""
        sid = self.open_session()
        try:
            yield sid
        finally:
            try:
                self.delete_session(sid)
            except ClientError as exc:
                if on_delete_error is not None:
                    on_delete_error(sid, exc)

    def begin_turn(self, sid: str) -> Turn:
        """``POST /v1/sessions/{sid}/turns``."""
        data = self.request("POST", f"/v1/sessions/{_quote(sid)}/turns", {}).data
        if not isinstance(data, dict) or not isinstance(data.get("turn_id"), str | int):
            raise ClientError(f"the supervisor at {self.url} answered a new turn without a turn_id")
        tools = data.get("tools")
        epoch = data.get("epoch")
        return Turn(
            turn_id=str(data["turn_id"]),
            epoch=epoch if isinstance(epoch, int) else None,
            tools=tools if isinstance(tools, list) else [],
            search_enabled=bool(data.get("search_enabled")),
        )

    def tool_search(self, sid: str, query: str) -> Reply:
        """``POST /v1/sessions/{sid}/tool_search``; it also activates the matches."""
        return self.request("POST", f"/v1/sessions/{_quote(sid)}/tool_search", {"query": query})

    def cancel_request(self, rid: str) -> None:
        """``POST /v1/requests/{rid}/cancel``."""
        self.request("POST", f"/v1/requests/{_quote(rid)}/cancel", {})

    def call(
        self,
        sid: str,
        tid: str,
        tool: str,
        arguments: dict[str, Any],
        on_event: Callable[[ServerSentEvent], None] | None = None,
        stream_timeout: float | None = None,
    ) -> CallResult:
        """``POST .../calls`` asking for an event stream; ``on_event`` sees every event
        before ``result``. ``stream_timeout`` bounds each wait for the next bytes (None:
        wait as long as the service's own call timeout lets the call run). A service that
        answers plain JSON instead of a stream is accepted too."""
        path = f"/v1/sessions/{_quote(sid)}/turns/{_quote(tid)}/calls"
        body = {"tool": tool, "arguments": arguments}
        conn, response = self._send("POST", path, body, f"{_EVENT_STREAM}, application/json", stream_timeout)
        try:
            content_type = response.getheader("Content-Type", "").split(";")[0].strip().lower()
            if response.status != 200 or content_type != _EVENT_STREAM:
                raw = self._read(response, stream_timeout)
                self._raise_for_status(response.status, response.reason, raw)
                return self._envelope(raw.decode("utf-8", errors="replace"))
            return self._stream(response, stream_timeout, on_event)
        finally:
            conn.close()

    def _stream(
        self,
        response: http.client.HTTPResponse,
        stream_timeout: float | None,
        on_event: Callable[[ServerSentEvent], None] | None,
    ) -> CallResult:
        result: CallResult | None = None
        try:
            for event in iter_events(self._chunks(response, stream_timeout), MAX_CALL_EVENT_CHARS):
                if event.event == "result":
                    result = self._envelope(event.data)
                elif event.event == "done":
                    break
                elif event.event == "error":
                    raise self._stream_error(event.data)
                elif on_event is not None:
                    on_event(event)
        except SSEError as exc:
            raise ClientError(f"the call's event stream from {self.url} broke: {exc}") from None
        if result is None:
            raise ClientError(f"the supervisor at {self.url} ended the call's event stream without a result")
        return result

    def _chunks(self, response: http.client.HTTPResponse, stream_timeout: float | None) -> Iterator[bytes]:
        """The body as it arrives (``read1`` returns what is there instead of filling a
        buffer, so progress events show while the call runs)."""
        while True:
            try:
                chunk = response.read1(_READ_SIZE)
            except TimeoutError:
                raise ClientError(
                    f"no news from the supervisor at {self.url} for {stream_timeout:g}s during the call"
                ) from None
            except (OSError, http.client.HTTPException) as exc:
                raise ClientError(
                    f"the call's event stream from {self.url} broke: {type(exc).__name__}"
                ) from None
            if not chunk:
                return
            yield chunk

    def _stream_error(self, data: str) -> ApiError:
        code, message = "stream_error", "the call's event stream reported an error"
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            error = json.loads(data)["error"]
            code = str(error.get("code") or code)
            message = str(error.get("message") or message)
        return ApiError(200, self._scrub(code), self._scrub(message))

    def _envelope(self, text: str) -> CallResult:
        try:
            envelope = json.loads(text)
        except ValueError:
            envelope = None
        if not isinstance(envelope, dict) or not isinstance(envelope.get("ok"), bool):
            raise ClientError(f"the supervisor at {self.url} answered the call without a result envelope")
        return CallResult(envelope, text)


def _quote(segment: str) -> str:
    """One path segment: ids come from the service, but a ``/`` or ``?`` in one must not
    change which route we hit."""
    return urllib.parse.quote(segment, safe="")
