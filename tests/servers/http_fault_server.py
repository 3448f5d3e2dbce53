"""An MCP server of ours over HTTP (Hypercorn, raw ASGI), with faults on request.

Run it inside a test's nursery::

    server = await nursery.start(serve_fault_server, FaultOptions(mode="sse"))
    ... ServerSpec(type="remote", url=server.url) ...

It speaks Streamable HTTP at ``/mcp`` (JSON or SSE answers, sessions, the GET stream,
DELETE), or only the legacy HTTP+SSE transport (``legacy=True``: ``GET /mcp`` opens the
stream, POSTs go to ``/messages``). It records every request (``server.seen``), so tests
can check headers, and it injects faults: a dropped stream mid-call, 404 for a session
after N requests, 5xx, slow answers, 401 after N requests, resumable streams.

Tools: ``echo {text}``, ``sleep {seconds}`` (progress first), ``drop`` (the answer's
stream breaks mid-call; in resumable mode a GET with ``Last-Event-ID`` then replays the
answer), ``hiccup`` (resumable mode: the POST stream is ended before the answer, which
such a GET replays), ``garbage`` (answered with a body, or an SSE ``message`` event,
that is not JSON), ``add_tool {name}`` (adds a tool and announces
``notifications/tools/list_changed`` on the GET stream).
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_quiet = logging.getLogger("tests.http_fault_server")
_quiet.setLevel(logging.CRITICAL + 1)  # the drop fault makes Hypercorn log an error on purpose
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


@attrs.define
class FaultOptions:
    """What the server does; the defaults make a well-behaved JSON-answering server."""

    mode: str = "json"  # how requests are answered: "json" or "sse"
    get_stream: bool = True  # offer the GET stream (405 otherwise)
    get_delay_s: float = 0.0  # the GET stream's answer waits this long
    expire_after: int | None = None  # a session's requests after this many get 404
    fail_status: int | None = None  # POSTs after `fail_after` (server-wide) get this status
    fail_after: int = 0
    delay_s: float = 0.0  # answers (but to initialize and tools/list) wait this long
    require_auth: str | None = None  # the Authorization value each request must carry
    unauthorized_after: int | None = None  # POSTs after this many (server-wide) get 401
    legacy: bool = False  # speak only the 2024-11-05 HTTP+SSE transport
    legacy_endpoint: str | None = None  # announce this endpoint instead of ours
    resumable: bool = False  # SSE events carry ids and a retry; see `hiccup`
    retry_ms: int = 100
    delete_status: int = 200


@attrs.frozen
class Seen:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    rpc: str | None = None  # the JSON-RPC method, for POSTs
    at: float = attrs.field(factory=trio.current_time)


@attrs.define(eq=False)
class _Session:
    id: str
    requests: int = 0
    tools: list[str] = attrs.field(factory=lambda: ["echo", "sleep", "drop", "hiccup", "garbage", "add_tool"])
    listeners: list[trio.MemorySendChannel[bytes]] = attrs.field(factory=list)
    replay: dict[str, bytes] = attrs.field(factory=dict)  # last event id -> events to resend


def sse(
    data: Any = None, *, event: str | None = None, id: str | None = None, retry: int | None = None
) -> bytes:
    """One SSE event; ``data`` None gives the priming form (an empty data line)."""
    lines = []
    if event:
        lines.append(f"event: {event}")
    if id is not None:
        lines.append(f"id: {id}")
    if retry is not None:
        lines.append(f"retry: {retry}")
    text = "" if data is None else data if isinstance(data, str) else json.dumps(data)
    lines.append(f"data: {text}")
    return ("\n".join(lines) + "\n\n").encode()


class FaultServer:
    """The ASGI app and what it recorded; ``url`` is set once it listens."""

    def __init__(self, options: FaultOptions) -> None:
        self.options = options
        self.url = ""
        self.seen: list[Seen] = []
        self.sessions: dict[str, _Session] = {}
        self.deleted: list[str] = []
        self.posts = 0
        self.get_answered_at: float | None = None  # when the first GET stream was answered
        self._ids = itertools.count(1)
        self._recorded = trio.Event()

    # ------------------------------------------------------------ test helpers

    def rpc_seen(self, rpc: str) -> list[Seen]:
        return [s for s in self.seen if s.rpc == rpc]

    def gets(self) -> list[Seen]:
        return [s for s in self.seen if s.method == "GET"]

    async def wait_for(self, predicate: Callable[[], bool], limit_s: float = 10.0) -> None:
        """Wait (bounded) until ``predicate`` holds, checking after each request seen."""
        with trio.fail_after(limit_s):
            while not predicate():
                await self._recorded.wait()

    def add_tool(self, name: str) -> None:
        """Add a tool to every session and announce it on their GET streams."""
        note = sse({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, event="message")
        for session in self.sessions.values():
            session.tools.append(name)
            for listener in session.listeners:
                listener.send_nowait(note)

    def close_get_streams(self) -> None:
        for session in self.sessions.values():
            for listener in session.listeners:
                listener.close()
            session.listeners.clear()

    # -------------------------------------------------------------------- ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        body = await _read_body(receive) if scope["method"] == "POST" else b""
        message = json.loads(body) if body else None
        rpc = message.get("method") if isinstance(message, dict) else None
        self.seen.append(Seen(scope["method"], scope["path"], headers, rpc))
        self._recorded.set()
        self._recorded = trio.Event()
        options = self.options
        if options.require_auth is not None and headers.get("authorization") != options.require_auth:
            return await _respond(send, 401, headers={"www-authenticate": "Bearer"})
        if scope["method"] == "POST":
            self.posts += 1
            if options.unauthorized_after is not None and self.posts > options.unauthorized_after:
                return await _respond(send, 401, headers={"www-authenticate": "Bearer"})
            if options.fail_status is not None and self.posts > options.fail_after:
                return await _respond(send, options.fail_status, b"boom")
        if options.legacy:
            return await self._legacy(scope, receive, send, message)
        if scope["path"] != "/mcp":
            return await _respond(send, 404)
        if scope["method"] == "POST":
            return await self._post(headers, message, receive, send)
        if scope["method"] == "GET":
            return await self._get(headers, receive, send)
        if scope["method"] == "DELETE":
            session_id = headers.get("mcp-session-id", "")
            self.deleted.append(session_id)
            self.sessions.pop(session_id, None)
            return await _respond(send, options.delete_status)
        return await _respond(send, 405)

    async def _post(self, headers: dict[str, str], message: Any, receive: Receive, send: Send) -> None:
        if message.get("method") == "initialize":
            session = _Session(uuid.uuid4().hex)
            self.sessions[session.id] = session
            return await self._answer(session, message, send)
        session_found = self.sessions.get(headers.get("mcp-session-id", ""))
        if session_found is None:
            return await _respond(send, 404 if "mcp-session-id" in headers else 400)
        session = session_found
        session.requests += 1
        if self.options.expire_after is not None and session.requests > self.options.expire_after:
            self.sessions.pop(session.id, None)
            return await _respond(send, 404)
        if "id" not in message or "method" not in message:
            return await _respond(send, 202)
        await self._answer(session, message, send)

    async def _answer(self, session: _Session, message: dict[str, Any], send: Send) -> None:
        if self.options.delay_s and message["method"] not in ("initialize", "tools/list"):
            await trio.sleep(self.options.delay_s)
        params = message.get("params") or {}
        tool = params.get("name") if message["method"] == "tools/call" else None
        token = (params.get("_meta") or {}).get("progressToken")
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": self._result(session, message)}
        extra = {"mcp-session-id": session.id} if message["method"] == "initialize" else {}
        if self.options.mode == "json":
            if tool == "garbage":
                return await _respond(send, 200, b"<html>not json</html>", "application/json")
            if tool == "drop":  # promise a body, send half of it, break the connection
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": _h({"content-type": "application/json", "content-length": "1000"}),
                    }
                )
                await send({"type": "http.response.body", "body": b'{"jsonrpc"', "more_body": True})
                raise _Dropped
            if tool == "sleep":
                await trio.sleep(float(params["arguments"].get("seconds", 0)))
            return await _respond(send, 200, json.dumps(answer).encode(), "application/json", extra)
        await send({"type": "http.response.start", "status": 200, "headers": _h(
            {"content-type": "text/event-stream", **extra})})  # fmt: skip
        priming = f"{session.id}-{next(self._ids)}"
        if self.options.resumable:
            await _body(send, sse(None, id=priming, retry=self.options.retry_ms))
        if token is not None and tool in ("sleep", "drop"):
            progress = {"progressToken": token, "progress": 1, "total": 2}
            await _body(send, sse({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress},
                                  event="message"))  # fmt: skip
        if tool == "drop":
            if self.options.resumable:  # the answer waits for a GET, as after a hiccup
                session.replay[priming] = sse(answer, event="message", id=f"{session.id}-{next(self._ids)}")
            raise _Dropped
        if tool == "hiccup" and self.options.resumable:
            session.replay[priming] = sse(answer, event="message", id=f"{session.id}-{next(self._ids)}")
            return await _body(send, b"", more=False)  # closed early; the answer waits for a GET
        if tool == "sleep":
            await trio.sleep(float(params["arguments"].get("seconds", 0)))
        event_id = f"{session.id}-{next(self._ids)}" if self.options.resumable else None
        if tool == "garbage":
            await _body(send, sse("<html>not json</html>", event="message", id=event_id))
            return await _body(send, b"", more=False)
        await _body(send, sse(answer, event="message", id=event_id))
        await _body(send, b"", more=False)

    def _result(self, session: _Session, message: dict[str, Any]) -> dict[str, Any]:
        method = message["method"]
        params = message.get("params") or {}
        if method == "initialize":
            asked = params.get("protocolVersion")
            return {
                "protocolVersion": asked if asked in VERSIONS else VERSIONS[-1],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "http-fault-server", "version": "1"},
            }
        if method == "tools/list":
            schema = {"type": "object"}
            return {"tools": [{"name": n, "description": f"the {n} tool", "inputSchema": schema}
                              for n in session.tools]}  # fmt: skip
        if method == "tools/call":
            name = params.get("name")
            arguments = params.get("arguments") or {}
            if name == "add_tool":
                self.add_tool(arguments["name"])
                text = "added"
            elif name == "sleep":
                text = "slept"
            else:
                text = str(arguments.get("text", name))
            return {"content": [{"type": "text", "text": text}], "isError": False}
        return {}

    async def _get(self, headers: dict[str, str], receive: Receive, send: Send) -> None:
        session = self.sessions.get(headers.get("mcp-session-id", ""))
        if session is None:
            return await _respond(send, 404 if "mcp-session-id" in headers else 400)
        replay = session.replay.pop(headers.get("last-event-id", ""), None)
        if replay is not None:  # resuming an answer stream: resend, then end
            await send({"type": "http.response.start", "status": 200, "headers": _h(
                {"content-type": "text/event-stream"})})  # fmt: skip
            await _body(send, replay)
            return await _body(send, b"", more=False)
        if not self.options.get_stream:
            return await _respond(send, 405)
        first = b""
        if self.options.resumable:
            first = sse(None, id=f"{session.id}-{next(self._ids)}", retry=self.options.retry_ms)
        if self.options.get_delay_s:  # no checkpoint otherwise: tests wait for a GET seen, then send
            await trio.sleep(self.options.get_delay_s)
        outbox, inbox = trio.open_memory_channel[bytes](100)
        session.listeners.append(outbox)
        if self.get_answered_at is None:
            self.get_answered_at = trio.current_time()
        await _stream(send, receive, inbox, first)

    async def _legacy(self, scope: Scope, receive: Receive, send: Send, message: Any) -> None:
        path, method = scope["path"], scope["method"]
        if path == "/mcp" and method == "GET":
            session = _Session(uuid.uuid4().hex)
            self.sessions[session.id] = session
            outbox, inbox = trio.open_memory_channel[bytes](100)
            session.listeners.append(outbox)
            endpoint = self.options.legacy_endpoint or f"/messages?session_id={session.id}"
            return await _stream(send, receive, inbox, sse(endpoint, event="endpoint"))
        if path == "/messages" and method == "POST":
            query = dict(p.split("=", 1) for p in scope["query_string"].decode().split("&") if "=" in p)
            session_found = self.sessions.get(query.get("session_id", ""))
            if session_found is None or not session_found.listeners:
                return await _respond(send, 404)
            await _respond(send, 202, b"Accepted")
            if isinstance(message, dict) and "id" in message and "method" in message:
                answer = {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": self._result(session_found, message),
                }
                garbage = (message.get("params") or {}).get("name") == "garbage"
                event = sse("<html>not json</html>" if garbage else answer, event="message")
                for listener in session_found.listeners:
                    listener.send_nowait(event)
            return None
        return await _respond(send, 405 if path == "/mcp" else 404)


class _Dropped(Exception):
    """Raised mid-response: Hypercorn then closes the connection without ending the body."""


def _h(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, v in headers.items()]


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _body(send: Send, data: bytes, *, more: bool = True) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": more})


async def _respond(
    send: Send,
    status: int,
    body: bytes = b"",
    kind: str = "text/plain",
    headers: dict[str, str] | None = None,
) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": _h({"content-type": kind, **(headers or {})})})  # fmt: skip
    await _body(send, body, more=False)


async def _stream(
    send: Send, receive: Receive, events: trio.MemoryReceiveChannel[bytes], first: bytes
) -> None:
    """An open-ended SSE response: ``first``, then whatever arrives, until the channel
    closes (the server ends the stream) or the client goes away."""
    await send(
        {"type": "http.response.start", "status": 200, "headers": _h({"content-type": "text/event-stream"})}
    )
    if first:
        await _body(send, first)
    ended = False
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        async for event in events:
            await _body(send, event)
        ended = True
        nursery.cancel_scope.cancel()
    if ended:
        await _body(send, b"", more=False)


async def serve_fault_server(
    options: FaultOptions | None = None,
    *,
    task_status: trio.TaskStatus[FaultServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve on 127.0.0.1 (port 0) until cancelled; reports the server once it listens."""
    server = FaultServer(options or FaultOptions())
    async with trio.open_nursery() as nursery:
        base = await nursery.start(serve_loopback, server)
        server.url = f"{base}/mcp"
        task_status.started(server)


async def serve_loopback(
    app: Any,
    *,
    configure: Callable[[Config], None] | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve an ASGI app with Hypercorn on 127.0.0.1 (port 0), quietly, until cancelled;
    reports its base URL once it listens. ``configure`` adds to Hypercorn's config
    (the TLS files of a mutual-TLS test: the URL is then https://)."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = _quiet
    config.graceful_timeout = 0.1
    if configure is not None:
        configure(config)
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(functools.partial(serve, app, config))  # type: ignore[arg-type]
        task_status.started(binds[0])
