"""What ``/v1/bridge`` would gain off Hypercorn (issue 37, item 4): a prototype, measured.

Not the product: a benchmark-only ``serve`` in which a connection whose request is a
WebSocket upgrade of exactly ``/v1/bridge`` is served by a small WebSocket path on the
Trio stream itself (h11 parses the request head, ``wsproto``'s frame layer the
frames), the same ``BridgeApp``, hub, links and sessions behind it; every other
connection goes to Hypercorn as before, the bytes already read replayed. The app's
``receive`` reads the socket in the link's reader task (no task and no queue between
the socket and the reader) and its ``send`` writes the frame in the caller's task;
Hypercorn's per-frame work (its read loop's ``fail_after``, the H11/WS protocol
wrappers, the shielded send under its lock, the ASGI queue) is gone. Left out, as a
prototype may (each is what landing it in ``serve`` would add): server pings
(``bridge.heartbeat_s``), TLS, the drain's tests (these sockets run in Hypercorn's
connection nursery, so its graceful timeout bounds them), a refused handshake's HTTP
answer (the bench's sockets are all accepted), Hypercorn's frame-size bound, a timeout
on the request head, and an upgrade that is not its connection's first request (a
kept-alive connection stays Hypercorn's).

Four contenders, interleaved (``interleave.py``), each a fresh server per round:
``ours`` (the product's ``serve``), ``own-socket`` (the prototype, wsproto's frames),
``own-lean`` (the prototype with its frames read and written by hand, ``LeanSocket``:
what wsproto's generic parser costs) and ``supergateway`` (its WebSocket mode), all in
front of the same stdio server::

    .venv/bin/python benchmarks/bench_bridge_own_socket.py --rounds 5 --calls 2000
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import h11
import trio
from wsproto.connection import Connection, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Message, Ping, TextMessage

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import interleave  # noqa: E402
from _bridge import Serve  # noqa: E402
from _common import PYTHON, ROOT, code_env, emit, free_port, supervisor_argv, worker  # noqa: E402
from bench_bridge import config  # noqa: E402
from bridge_peers import measure_supergateway, ours_round_trip  # noqa: E402

BRIDGE_TARGET = b"/v1/bridge"
HEAD_LIMIT = 64 * 1024
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

# ------------------------------------------------------------------ the prototype


class Replayed(trio.abc.Stream):
    """A socket stream whose first bytes (read to route it) are read again."""

    def __init__(self, stream: trio.SocketStream, head: bytes) -> None:
        self._stream = stream
        self._head = head
        self.socket = stream.socket

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            return head
        return await self._stream.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()


class OwnSocket:
    """One ``/v1/bridge`` WebSocket served on its Trio stream, ASGI to the app."""

    def __init__(self, stream: trio.SocketStream, request: h11.Request, rest: bytes) -> None:
        self.stream = stream
        self.request = request
        self.frames = Connection(ConnectionType.SERVER)
        self.rest = rest
        self.lock = trio.Lock()
        self.text: list[str] = []
        self.connected = False
        self.gone = False

    def scope(self) -> dict[str, Any]:
        target = self.request.target
        path, _, query = target.partition(b"?")
        headers = [(name.lower(), value) for name, value in self.request.headers]
        protocols = [
            p.strip().decode()
            for name, value in headers
            if name == b"sec-websocket-protocol"
            for p in value.split(b",")
        ]
        sock = self.stream.socket
        return {
            "type": "websocket",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "scheme": "ws",
            "path": path.decode(),
            "raw_path": path,
            "query_string": query,
            "root_path": "",
            "headers": headers,
            "client": sock.getpeername()[:2],
            "server": sock.getsockname()[:2],
            "subprotocols": protocols,
            "extensions": {},
            "state": {},
        }

    async def write(self, data: bytes) -> None:
        lock = self.lock
        try:
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            await self.stream.send_all(data)
        finally:
            lock.release()

    async def read(self) -> bytes:
        """The socket's next bytes (first those read with the head); empty: it is gone."""
        data, self.rest = self.rest, b""
        if not data and not self.gone:
            try:
                data = await self.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
        self.gone = self.gone or not data
        return data

    async def receive(self) -> dict[str, Any]:
        if not self.connected:
            self.connected = True
            return {"type": "websocket.connect"}
        while True:
            for event in self.frames.events():
                if isinstance(event, TextMessage | BytesMessage):
                    if isinstance(event, TextMessage):
                        self.text.append(event.data)
                    if event.message_finished:
                        text, self.text = "".join(self.text), []
                        return {"type": "websocket.receive", "text": text}
                elif isinstance(event, Ping):
                    await self.write(self.frames.send(event.response()))
                elif isinstance(event, CloseConnection):
                    if not self.gone:
                        self.gone = True
                        await self.write(self.frames.send(event.response()))
                    return {"type": "websocket.disconnect", "code": event.code}
            data = await self.read()
            if not data:
                return {"type": "websocket.disconnect", "code": 1006}
            self.frames.receive_data(data)

    async def send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "websocket.send":
            text = message.get("text")
            data = text if text is not None else message["bytes"]
            await self.write(self.frames.send(Message(data=data)))
        elif kind == "websocket.accept":
            key = dict(self.request.headers)[b"sec-websocket-key"]
            accept = base64.b64encode(hashlib.sha1(key + WS_GUID).digest())
            head = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            head += b"Sec-WebSocket-Accept: " + accept + b"\r\n"
            if message.get("subprotocol"):
                head += b"Sec-WebSocket-Protocol: " + message["subprotocol"].encode() + b"\r\n"
            await self.write(head + b"\r\n")
        elif kind == "websocket.close":
            if not self.gone:
                self.gone = True
                await self.write(self.frames.send(CloseConnection(message.get("code", 1000))))
        else:
            raise RuntimeError(f"the prototype does not serve {kind!r} (a refused handshake)")


def frame_bytes(opcode: int, payload: bytes) -> bytes:
    """One unfragmented, unmasked frame (a server's)."""
    size = len(payload)
    if size < 126:
        head = bytes((0x80 | opcode, size))
    elif size < 65536:
        head = bytes((0x80 | opcode, 126)) + size.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, 127)) + size.to_bytes(8, "big")
    return head + payload


class LeanSocket(OwnSocket):
    """``OwnSocket`` with its frames read and written by hand instead of by wsproto:
    what a WebSocket frame costs in Python without a generic parser (the unmasking one
    XOR of two integers). No extension, no UTF-8 check of a partial frame."""

    def __init__(self, stream: trio.SocketStream, request: h11.Request, rest: bytes) -> None:
        super().__init__(stream, request, b"")
        self.buffer = bytearray(rest)
        self.parts: list[bytes] = []
        self.binary = False

    def next_frame(self) -> tuple[int, bool, bytes] | None:
        buf = self.buffer
        if len(buf) < 2:
            return None
        first, second = buf[0], buf[1]
        size, at = second & 0x7F, 2
        if size == 126:
            if len(buf) < 4:
                return None
            size, at = int.from_bytes(buf[2:4], "big"), 4
        elif size == 127:
            if len(buf) < 10:
                return None
            size, at = int.from_bytes(buf[2:10], "big"), 10
        if not second & 0x80:
            raise ValueError("a client frame that is not masked")
        end = at + 4 + size
        if len(buf) < end:
            return None
        mask, payload = bytes(buf[at : at + 4]), bytes(buf[at + 4 : end])
        del buf[:end]
        if size:
            key = int.from_bytes((mask * (size // 4 + 1))[:size], "little")
            payload = (int.from_bytes(payload, "little") ^ key).to_bytes(size, "little")
        return first & 0x0F, bool(first & 0x80), payload

    async def receive(self) -> dict[str, Any]:
        if not self.connected:
            self.connected = True
            return {"type": "websocket.connect"}
        while True:
            while (frame := self.next_frame()) is not None:
                opcode, fin, payload = frame
                if opcode in (0, 1, 2):
                    self.binary = opcode == 2 if opcode else self.binary
                    self.parts.append(payload)
                    if fin:
                        data, self.parts = b"".join(self.parts), []
                        if self.binary:
                            return {"type": "websocket.receive", "bytes": data}
                        return {"type": "websocket.receive", "text": data.decode()}
                elif opcode == 9:
                    await self.write(frame_bytes(0xA, payload))
                elif opcode == 8:
                    if not self.gone:
                        self.gone = True
                        await self.write(frame_bytes(0x8, payload[:2]))
                    code = int.from_bytes(payload[:2], "big") if payload else 1005
                    return {"type": "websocket.disconnect", "code": code}
            data = await self.read()
            if not data:
                return {"type": "websocket.disconnect", "code": 1006}
            self.buffer += data

    async def send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "websocket.send":
            text = message.get("text")
            data = frame_bytes(0x1, text.encode()) if text is not None else frame_bytes(0x2, message["bytes"])
            await self.write(data)
        elif kind == "websocket.close":
            if not self.gone:
                self.gone = True
                code = message.get("code", 1000).to_bytes(2, "big")
                await self.write(frame_bytes(0x8, code + message.get("reason", "").encode()))
        else:
            await super().send(message)


async def routed(app: Any, config_: Any, context: Any, state: Any, stream: trio.SocketStream) -> None:
    """Hypercorn's per-connection handler, with ``/v1/bridge`` upgrades taken off it."""
    from hypercorn.trio.tcp_server import TCPServer

    head = b""
    while b"\r\n\r\n" not in head and len(head) < HEAD_LIMIT:
        try:
            data = await stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        if not data:
            break
        head += data
    end = head.find(b"\r\n\r\n") + 4
    parser = h11.Connection(h11.SERVER)
    parser.receive_data(head[:end] if end >= 4 else head)
    try:
        request = parser.next_event()
    except h11.RemoteProtocolError:
        request = None
    upgrade = isinstance(request, h11.Request) and request.target.partition(b"?")[0] == BRIDGE_TARGET
    if not upgrade or not any(n == b"upgrade" and v.lower() == b"websocket" for n, v in request.headers):
        await TCPServer(app, config_, context, state, Replayed(stream, head))  # type: ignore[arg-type]
        return
    socket = SOCKET[0](stream, request, head[end:])
    try:
        await app.app(socket.scope(), socket.receive, socket.send)
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


SOCKET: list[type[OwnSocket]] = [OwnSocket]  # the one the ``--serve`` process serves with


def serve_patched(argv: list[str], lean: bool) -> None:
    """``mcp-supervisor serve ARGV`` with ``routed`` as Hypercorn's connection handler
    (with ``lean``, its sockets frame by hand: ``LeanSocket``)."""
    import hypercorn.trio.run

    from supervisor.cli.main import main

    SOCKET[0] = LeanSocket if lean else OwnSocket
    hypercorn.trio.run.TCPServer = routed  # type: ignore[assignment,misc]
    sys.exit(main(["serve", *argv]))


# ------------------------------------------------------------------ the measures


@contextmanager
def serving(patched: str | None) -> Iterator[Serve]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-own-socket-") as tmp:
        config_file = Path(tmp) / "config.json"
        config_file.write_text(json.dumps(config(port, 16, 0)))
        args = ["--config", str(config_file), "--state-dir", tmp]
        command = [PYTHON, str(HERE / Path(__file__).name), patched, *args] if patched else None
        command = command or supervisor_argv("serve", *args)
        serve = subprocess.Popen(
            command, cwd=ROOT, env=code_env(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            yield Serve(port, serve.pid)
        finally:
            serve.terminate()
            serve.wait(timeout=60)


SERVE_FLAGS = {"own-socket": "--serve", "own-lean": "--serve-lean"}


def one(name: str, calls: int) -> dict[str, Any]:
    if name == "supergateway":
        return trio.run(measure_supergateway, calls, 0)
    with serving(SERVE_FLAGS.get(name)) as serve:
        return trio.run(ours_round_trip, serve, calls)


def main() -> None:
    if sys.argv[1:2] in (["--serve"], ["--serve-lean"]):
        serve_patched(sys.argv[2:], lean=sys.argv[1] == "--serve-lean")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--one", choices=("ours", *SERVE_FLAGS, "supergateway"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.one:
        emit(one(args.one, args.calls))
        return

    def measure(name: str) -> interleave.Measure:
        return lambda _round: worker(Path(__file__).name, "--one", name, "--calls", args.calls, timeout=600)

    names = ("ours", *SERVE_FLAGS, "supergateway")
    section = interleave.run("bridge-own-socket", {n: measure(n) for n in names}, args.rounds)
    if args.json:
        args.json.write_text(json.dumps(section, indent=2))
    print(json.dumps(section, indent=2))


if __name__ == "__main__":
    main()
