"""Shared pieces of the admin API tests (no tests of its own).

* ``Http``: a tiny HTTP/1.1 client on ``trio.open_tcp_stream`` + h11 (one connection
  per request, ``Connection: close``). It sends any Host, Origin or Authorization it is
  told to, sends the body while reading the answer (so a server that answers 413
  before the body is in is heard), and reads server-sent events frame by frame.
* ``admin_running``: a real ``Supervisor`` with the real Hypercorn admin server on
  127.0.0.1 port 0, in the test's nursery; ``admin_in_thread``: the same in a thread
  of its own, for synchronous tests (hypothesis drives it with ``http.client``).
* ``conforms``: validates an answer against the schema the OpenAPI document names.
"""

from __future__ import annotations

import queue
import sys
import threading
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import h11
import jsonschema
import orjson
import trio

from actors.spec import ServerSpec, Start
from supervisor.admin.openapi import document
from supervisor.server import serve
from supervisor.service import Supervisor
from supervisor.settings.model import AdminSettings, Config, TokenGrant, TrustSettings
from supervisor.web.routes import ROUTES
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")
T = TypeVar("T")
ALICE, BOB = "alice-token-0123456789", "bob-token-9876543210"
TOKENS = {ALICE: "alice", BOB: "bob"}
_READ = 65536


def mini_spec(name: str, *flags: str, **options: Any) -> ServerSpec:
    """An eager, trusted mini_server.py (options override)."""
    options.setdefault("shutdown_grace_s", 0.5)
    options.setdefault("trusted", True)
    options.setdefault("start", Start.EAGER)
    return ServerSpec(name=name, command=(sys.executable, MINI, *flags), **options)


def config_of(
    *specs: ServerSpec, tokens: Mapping[str, TokenGrant | str] | None = None, approval_timeout_s: float = 30
) -> Config:
    """A config of ``specs``; ``tokens`` maps bearer token → tenant (or a ``TokenGrant``)."""
    return Config(
        servers=tuple(specs),
        admin=AdminSettings(tokens=dict(tokens or {})),
        trust=TrustSettings(approval_timeout_s=approval_timeout_s),
    )


# --------------------------------------------------------------------- client


@attrs.frozen
class Reply:
    """One complete HTTP answer."""

    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def raw(self) -> bytes:
        """Everything that came back, headers included (for secret greps)."""
        head = "".join(f"{k}: {v}\n" for k, v in self.headers.items()).encode()
        return head + self.body


@attrs.frozen
class Sse:
    """One server-sent event (``data`` parsed as JSON)."""

    event: str
    data: Any


def _headers(raw: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in raw:
        key = name.decode().lower()
        found[key] = f"{found[key]}, {value.decode()}" if key in found else value.decode()
    return found


class _Exchange:
    """One request on one connection; the answer is read incrementally."""

    def __init__(self, stream: trio.SocketStream, conn: h11.Connection) -> None:
        self.stream = stream
        self.conn = conn
        self.chunks: list[bytes] = []

    async def next_event(self) -> Any:
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.conn.receive_data(await self.stream.receive_some(_READ))


class EventStream:
    """The frames of a text/event-stream answer, as they arrive."""

    def __init__(self, exchange: _Exchange, status: int, headers: Mapping[str, str]) -> None:
        self._exchange = exchange
        self.status = status
        self.headers = headers
        self._buffer = b""
        self.raw = b""  # every byte received, for secret greps
        self.comments: list[str] = []
        self.ended = False

    async def next(self) -> Sse | None:
        """The next event, or None when the body ended."""
        while True:
            if b"\n\n" in self._buffer:
                block, self._buffer = self._buffer.split(b"\n\n", 1)
                event, data = "message", []
                for line in block.decode().split("\n"):
                    if line.startswith(":"):
                        self.comments.append(line[1:].strip())
                    elif line.startswith("event: "):
                        event = line[len("event: ") :]
                    elif line.startswith("data: "):
                        data.append(line[len("data: ") :])
                if data:
                    return Sse(event, orjson.loads("\n".join(data)))
                continue
            if self.ended:
                return None
            item = await self._exchange.next_event()
            if isinstance(item, h11.Data):
                self._buffer += bytes(item.data)
                self.raw += bytes(item.data)
            elif isinstance(item, h11.EndOfMessage | h11.ConnectionClosed):
                self.ended = True

    async def until(self, predicate: Callable[[Sse], bool]) -> list[Sse]:
        """Events up to and including the first one ``predicate`` accepts."""
        seen = []
        while True:
            event = await self.next()
            assert event is not None, f"the stream ended before the awaited event; saw {seen}"
            seen.append(event)
            if predicate(event):
                return seen

    async def rest(self) -> list[Sse]:
        """Every event until the body ends."""
        events = []
        while (event := await self.next()) is not None:
            events.append(event)
        return events


class Http:
    """Requests to one admin server; ``token`` goes into every request unless overridden."""

    def __init__(self, url: str, token: str | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        self.host, self.port = parts.hostname, parts.port
        self.authority = parts.netloc
        self.token = token

    def as_(self, token: str | None) -> Http:
        return Http(f"http://{self.authority}", token)

    def _build(
        self,
        method: str,
        path: str,
        json: Any,
        body: bytes | None,
        headers: Mapping[str, str] | None,
        host: str | None,
        token: str | None,
    ) -> tuple[list[tuple[str, str]], bytes | None]:
        if json is not None:
            body = orjson.dumps(json)
        sent: list[tuple[str, str]] = [("Host", host if host is not None else self.authority)]
        sent.append(("Connection", "close"))
        if token is not None:
            sent.append(("Authorization", f"Bearer {token}"))
        chunked = any(name.lower() == "transfer-encoding" for name in headers or {})
        if body is not None and not chunked:
            sent.append(("Content-Length", str(len(body))))
            if json is not None:
                sent.append(("Content-Type", "application/json"))
        sent += list((headers or {}).items())
        return sent, body

    @asynccontextmanager
    async def _exchange(
        self, method: str, path: str, sent: list[tuple[str, str]], body: bytes | None
    ) -> AsyncIterator[tuple[_Exchange, h11.Response]]:
        stream = await trio.open_tcp_stream(self.host, self.port)
        async with stream:
            conn = h11.Connection(h11.CLIENT)
            exchange = _Exchange(stream, conn)
            await stream.send_all(conn.send(h11.Request(method=method, target=path, headers=sent)))

            async def send_body() -> None:
                try:
                    if body:
                        for start in range(0, len(body), _READ):
                            await stream.send_all(conn.send(h11.Data(data=body[start : start + _READ])))
                    await stream.send_all(conn.send(h11.EndOfMessage()))
                except (trio.BrokenResourceError, trio.ClosedResourceError, h11.LocalProtocolError):
                    pass  # the server answered (and closed) before taking it all

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send_body)
                while True:
                    event = await exchange.next_event()
                    if isinstance(event, h11.Response):
                        break
                    assert isinstance(event, h11.InformationalResponse), event
                try:
                    yield exchange, event
                finally:
                    nursery.cancel_scope.cancel()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        host: str | None = None,
    ) -> Reply:
        """One request, its whole answer (``as_(token)`` for another token, or none)."""
        sent, data = self._build(method, path, json, body, headers, host, self.token)
        async with self._exchange(method, path, sent, data) as (exchange, response):
            chunks = []
            while True:
                event = await exchange.next_event()
                if isinstance(event, h11.Data):
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    break
        return Reply(response.status_code, _headers(response.headers), b"".join(chunks))

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[EventStream]:
        """A request answered with text/event-stream, read event by event."""
        sent, data = self._build(
            method, path, json, None, {"Accept": "text/event-stream", **(headers or {})}, None, self.token
        )
        async with self._exchange(method, path, sent, data) as (exchange, response):
            yield EventStream(exchange, response.status_code, _headers(response.headers))

    # Shortcuts for the usual flow.

    async def session(self, **body: Any) -> str:
        reply = await self.request("POST", "/v1/sessions", json=body or None)
        assert reply.status == 201, reply
        sid: str = reply.json()["session_id"]
        return sid

    async def turn(self, sid: str) -> dict[str, Any]:
        reply = await self.request("POST", f"/v1/sessions/{sid}/turns")
        assert reply.status == 201, reply
        data: dict[str, Any] = reply.json()
        return data

    async def call(self, sid: str, tid: str, tool: str, arguments: Any = None, **extra: Any) -> Reply:
        body = {"tool": tool, "arguments": arguments or {}, **extra}
        return await self.request("POST", f"/v1/sessions/{sid}/turns/{tid}/calls", json=body)


# --------------------------------------------------------------------- servers


@attrs.frozen
class Running:
    """A supervisor with its admin API."""

    sup: Supervisor
    url: str

    def http(self, token: str | None = None) -> Http:
        return Http(self.url, token)


@asynccontextmanager
async def admin_running(
    config: Config, state_dir: Path, *, client_capabilities: Mapping[str, Any] | None = None
) -> AsyncIterator[Running]:
    """The supervisor and the real Hypercorn admin server on 127.0.0.1:0
    (``client_capabilities``: what its servers are told, as ``serve`` tells them)."""
    opened = Supervisor.open(config, state_dir=state_dir, client_capabilities=client_capabilities)
    async with opened as sup, trio.open_nursery() as nursery:
        url: str = await nursery.start(serve, sup, "127.0.0.1:0")
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0"), url
        yield Running(sup, url)
        nursery.cancel_scope.cancel()


@contextmanager
def loop_in_thread(
    opened: Callable[[], AbstractAsyncContextManager[T]], timeout_s: float = 20, name: str = "trio-loop"
) -> Iterator[tuple[T, trio.lowlevel.TrioToken]]:
    """Enter ``opened()`` in a Trio loop of a thread of its own (for synchronous tests,
    e.g. driven by Hypothesis); yields what it gave and the loop's token, for
    ``trio.from_thread.run``. Leaving the block leaves the context and ends the loop."""
    ready: queue.Queue[tuple[T, trio.lowlevel.TrioToken, trio.Event]] = queue.Queue()
    failures: list[BaseException] = []

    async def main() -> None:
        async with opened() as value:
            stop = trio.Event()
            ready.put((value, trio.lowlevel.current_trio_token(), stop))
            await stop.wait()

    def target() -> None:
        try:
            trio.run(main)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    try:
        value, token, stop = ready.get(timeout=timeout_s)
    except queue.Empty:
        thread.join(1)
        raise AssertionError(f"{name} did not start: {failures}") from None
    try:
        yield value, token
    finally:
        trio.from_thread.run_sync(stop.set, trio_token=token)
        thread.join(timeout_s)
        assert not thread.is_alive(), f"{name} did not stop"
    if failures:
        raise failures[0]


@contextmanager
def admin_in_thread(config: Config, state_dir: Path, timeout_s: float = 20) -> Iterator[str]:
    """``admin_running`` in a thread of its own (for synchronous tests); yields the URL."""
    with loop_in_thread(lambda: admin_running(config, state_dir), timeout_s, "admin-api") as (running, _):
        yield running.url


async def until(predicate: Callable[[], bool], timeout_s: float = 10) -> None:
    """Poll a condition that no event announces (a file appearing, a thread's state)."""
    with trio.fail_after(timeout_s):
        while True:
            if predicate():
                return
            await trio.sleep(0.01)


async def wait_for(http: Http, path: str, predicate: Callable[[Any], bool], timeout_s: float = 10) -> Any:
    """Poll a GET until its JSON satisfies ``predicate``; the last answer."""
    with trio.fail_after(timeout_s):
        while True:
            reply = await http.request("GET", path)
            if reply.status == 200 and predicate(reply.json()):
                return reply.json()
            await trio.sleep(0.02)


# --------------------------------------------------------------------- contract

DOCUMENT = document()
OPERATIONS = {route.operation: route for route in ROUTES}


def conforms(operation: str, reply: Reply) -> None:
    """The reply is what the OpenAPI document promises for ``operation``."""
    route = OPERATIONS[operation]
    spec = DOCUMENT["paths"][route.path][route.method.lower()]
    assert str(reply.status) in spec["responses"], (operation, reply)
    content = spec["responses"][str(reply.status)].get("content")
    if content is None:
        assert reply.body == b"", reply
        return
    media = reply.headers.get("content-type", "").split(";")[0]
    assert any(media == key.split(";")[0] for key in content), (media, list(content))
    if media == "application/json":
        schema = {**content["application/json"]["schema"], "components": DOCUMENT["components"]}
        jsonschema.Draft202012Validator(schema).validate(reply.json())


def error_code(reply: Reply) -> str:
    """The admin error code of a refusal: ``error.code``, or on ``/mcp`` (a JSON-RPC
    error object) ``error.data.code``."""
    error = reply.json()["error"]
    code = error["data"]["code"] if isinstance(error["code"], int) else error["code"]
    assert isinstance(code, str), reply
    return code


def path_of(operation: str, **ids: str) -> str:
    """The path of an operation with its parameters filled (percent-encoded)."""
    path = OPERATIONS[operation].path
    for name, value in ids.items():
        path = path.replace("{" + name + "}", urllib.parse.quote(value, safe=""))
    return path
