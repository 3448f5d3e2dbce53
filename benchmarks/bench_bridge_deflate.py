"""What a client offering permessage-deflate costs a ``/v1/bridge`` round trip.

    python benchmarks/bench_bridge_deflate.py [--calls 1000] [--rounds 4]

A real ``serve`` (``bench_bridge.py``'s config, one ``mini`` server) and two
sockets made with wsproto over a blocking socket, one offering permessage-deflate
(as browsers always do) and one not, each with a session; ``tools/call`` round trips
on each, interleaved in rounds. Prints each socket's negotiated extensions, its p50
and ``serve``'s CPU per call. Since ``serve`` declines the offer (the deflate wrapper
of ``supervisor/server/hypercorn_patches.py``), both sockets run plain and the two rows
agree; before it, the deflating socket's row was the dearer (``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Ping, Request, TextMessage
from wsproto.extensions import PerMessageDeflate

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _bridge import INIT, SUBPROTOCOL, call  # noqa: E402
from _common import serve_running  # noqa: E402
from bench_bridge import config  # noqa: E402
from bridge_peers import cpu_s  # noqa: E402

Rpc = Callable[[dict[str, Any]], dict[str, Any]]


class Socket:
    """One blocking WebSocket speaking the envelope by hand."""

    def __init__(self, port: int, deflate: bool) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.pending: list[Any] = []
        offer = [PerMessageDeflate()] if deflate else []
        self.sock.sendall(
            self.ws.send(
                Request(
                    host=f"127.0.0.1:{port}", target="/v1/bridge", subprotocols=SUBPROTOCOL, extensions=offer
                )
            )
        )
        accepted = self._next()
        assert isinstance(accepted, AcceptConnection), accepted
        self.extensions = [type(e).__name__ for e in accepted.extensions]

    def _next(self) -> Any:
        while not self.pending:
            self.ws.receive_data(self.sock.recv(65536))
            for event in self.ws.events():
                if isinstance(event, Ping):
                    self.sock.sendall(self.ws.send(event.response()))
                else:
                    self.pending.append(event)
        return self.pending.pop(0)

    def send(self, frame: dict[str, Any]) -> None:
        self.sock.sendall(self.ws.send(TextMessage(data=orjson.dumps(frame).decode())))

    def receive(self) -> dict[str, Any]:
        event = self._next()
        assert isinstance(event, TextMessage), event
        frame: dict[str, Any] = orjson.loads(event.data)
        return frame

    def session(self) -> Rpc:
        self.send({"v": 1, "type": "mcp:session:open", "id": 1, "data": {"serverName": "mini"}})
        sid = self.receive()["data"]["sessionId"]

        def rpc(message: dict[str, Any]) -> dict[str, Any]:
            self.send({"v": 1, "type": "mcp:message", "data": {"sessionId": sid, "jsonrpc": message}})
            while True:
                frame = self.receive()
                if frame["type"] == "mcp:message" and frame["data"]["jsonrpc"].get("id") == message["id"]:
                    return frame

        rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self.send({"v": 1, "type": "mcp:message", "data": {"sessionId": sid, "jsonrpc": initialized}})
        return rpc


def ready(port: int) -> None:
    """Wait (up to 20 s) until ``serve`` answers ``/v1/health``."""
    for _ in range(400):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as probe:
                probe.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                if probe.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("serve did not answer /v1/health in 20 s")


def measure(port: int, pid: int, calls: int, rounds: int) -> dict[str, Any]:
    sockets = {name: Socket(port, name == "deflate offered") for name in ("plain", "deflate offered")}
    rpcs = {name: s.session() for name, s in sockets.items()}
    times: dict[str, list[float]] = {name: [] for name in rpcs}
    cpu = dict.fromkeys(rpcs, 0.0)
    for rpc in rpcs.values():
        for i in range(300):  # warm-up
            rpc(call(i, "warm"))
    for r in range(rounds):
        for name, rpc in rpcs.items():
            before = cpu_s(pid)
            for i in range(calls):
                t0 = time.perf_counter()
                rpc(call(1000 + r * calls + i, f"r{r}c{i}"))
                times[name].append((time.perf_counter() - t0) * 1e6)
            cpu[name] += cpu_s(pid) - before
    return {
        name: {
            "extensions": sockets[name].extensions,
            "p50_us": round(statistics.median(v)),
            "serve_cpu_us_per_call": round(cpu[name] * 1e6 / len(v)),
        }
        for name, v in times.items()
    } | {"load": os.getloadavg()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with serve_running(lambda port: config(port, 16, 0), "bench-deflate-") as (port, pid):
        ready(port)
        print(orjson.dumps(measure(port, pid, args.calls, args.rounds)).decode())
