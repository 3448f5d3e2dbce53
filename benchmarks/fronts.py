"""The fronts ``bench_fronts.py`` compares (our gateway, the peers a user would pick
instead, the client straight to the backend) and one front's measurement: sequential
p50/p99 of an echo call over one session, calls/s over several sessions at once, and,
when asked, the correctness checks (progress, a leak to another session, a cancel
reaching the backend, the backend SIGKILLed under a call). One front is started,
measured and stopped per call of ``measure_front``: a fresh server every round."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import httpx2
import peers
import trio
from _common import ROOT, code_env, free_port, quantiles, supervisor_argv
from fronts_ws import kill_mid_call, measure_ws
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).resolve().parent
MINI = str(ROOT / "tests" / "servers" / "mini_server.py")
HTTP_SERVER = str(HERE / "http_server.py")
FRONTS = (
    "direct-http", "ours", "fastmcp", "mcp-proxy", "supergateway", "supergateway-ws",
    "ours-http", "fastmcp-http", "ours-lean",
)  # fmt: skip
NEED_HTTP_BACKEND = ("direct-http", "ours-http", "fastmcp-http")


class Front:
    """One front (or the direct row) running as a process group of its own."""

    def __init__(self, name: str, scratch: Path, backend_url: str, code: Path = ROOT) -> None:
        self.name = name
        self.code = code  # ours: the copy of the project whose ``serve`` runs
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.methods = scratch / f"{name}.methods.log"
        self.backend = [sys.executable, MINI, "--methods-log", str(self.methods)]
        self.argv = self._argv(scratch, backend_url)
        self.process: subprocess.Popen[bytes] | None = None

    def _argv(self, scratch: Path, backend_url: str) -> list[str]:
        if self.name == "direct-http":
            self.port = int(backend_url.rsplit(":", 1)[1].split("/")[0])
            self.url = backend_url
            return []
        if self.name in ("ours", "ours-http", "ours-lean"):
            server: dict[str, Any] = {"command": self.backend}
            if self.name == "ours-http":
                server = {"url": backend_url, "transport": "streamable-http"}
            config = {
                "admin": {"bind": f"127.0.0.1:{self.port}"},
                "tool_search": {"enabled": False},
                "servers": {"b": {**server, "trusted": True, "start": "eager", "call_timeout_ms": 60_000}},
            }
            path = scratch / f"{self.name}.json"
            path.write_text(json.dumps(config))
            state = scratch / f"{self.name}.state"
            argv = supervisor_argv("serve", "--config", str(path), "--state-dir", str(state))
            if self.name == "ours-lean":  # the same serve on the lean HTTP/1.1 prototype
                argv[1:3] = [str(HERE / "lean_mcp.py")]
            return argv
        if self.name in ("fastmcp", "fastmcp-http"):
            python = str(peers.python_peer("fastmcp") / "python")
            target = ["--", *self.backend] if self.name == "fastmcp" else [backend_url]
            return [python, str(HERE / "fastmcp_proxy.py"), str(self.port), *target]
        if self.name == "mcp-proxy":
            proxy = str(peers.python_peer("mcp-proxy") / "mcp-proxy")
            return [proxy, "--port", str(self.port), "--log-level", "WARNING", "--", *self.backend]
        if self.name == "supergateway":
            gateway = str(peers.npm_peer("supergateway"))
            command = " ".join(self.backend)
            return [gateway, "--stdio", command, "--outputTransport", "streamableHttp", "--stateful"]
        if self.name == "supergateway-ws":
            self.url = f"ws://127.0.0.1:{self.port}/message"
            gateway = str(peers.npm_peer("supergateway"))
            return [gateway, "--stdio", " ".join(self.backend), "--outputTransport", "ws"]
        raise ValueError(self.name)

    def start(self) -> None:
        if not self.argv:
            return
        argv = self.argv
        if self.name.startswith("supergateway"):  # its default log level logs every message
            argv = [*argv, "--port", str(self.port), "--logLevel", "none"]
        ours = self.name.startswith("ours")
        self.process = subprocess.Popen(
            argv,
            cwd=self.code if ours else None,
            env=code_env(self.code) if ours else None,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_port(self.port, self.process, self.name)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        for pid in self.backend_pids():
            _kill(pid)

    def backend_pids(self) -> list[int]:
        """The backend processes of this front (its log path is in their argv)."""
        marker = str(self.methods)
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
                except OSError:
                    continue
                if argv[1:2] == [MINI] and marker in argv:  # not the front, not a shell
                    found.append(int(entry.name))
        return found

    @staticmethod
    def kill(pid: int) -> None:
        _kill(pid)

    def seen(self, method: str) -> bool:
        return self.methods.exists() and method in self.methods.read_text().split()


def _leaf(exc: BaseException) -> str:
    """The first real error inside nested exception groups, in one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:200]


def _kill(pid: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _wait_port(port: int, process: subprocess.Popen[bytes], name: str) -> None:
    import socket

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with status {process.returncode} before listening")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{name} did not listen on {port} within 60 s")


@asynccontextmanager
async def session(url: str, handler: Any = None) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(timeout=60)
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode="legacy", message_handler=handler) as client:
        yield client


async def tool_names(client: Client) -> dict[str, str]:
    """``echo`` / ``progress`` / ``sleep`` -> the front's name for it (ours namespaces)."""
    listed = await client.list_tools()
    names: dict[str, str] = {}
    for tool in listed.tools:
        for plain in ("echo", "progress", "sleep"):
            if tool.name == plain or tool.name.endswith("_" + plain):
                names.setdefault(plain, tool.name)
    return names


async def measure(front: Front, calls: int, sessions: int, seconds: float, checks: bool) -> dict[str, Any]:
    result: dict[str, Any] = {}
    async with session(front.url) as client:
        names = await tool_names(client)
        echo = names["echo"]
        for _ in range(30):
            await client.call_tool(echo, {"text": "warm"})
        times = []
        for i in range(calls):
            began = time.perf_counter()
            answer = await client.call_tool(echo, {"text": f"call {i}"})
            times.append((time.perf_counter() - began) * 1000)
            assert answer.content[0].text == f"call {i}", answer  # type: ignore[union-attr]
        result["sequential_ms"] = quantiles(times)
    result["calls_per_s"] = await throughput(front.url, echo, sessions, seconds)
    if checks and "progress" in names:
        result.update(await correctness(front, names))
    return result


async def throughput(url: str, echo: str, sessions: int, seconds: float) -> float:
    done = [0]
    ready = trio.Event()
    opened = [0]

    async def one(n: int) -> None:
        async with session(url) as client:
            await client.call_tool(echo, {"text": "warm"})
            opened[0] += 1
            if opened[0] == sessions:
                ready.set()
            await ready.wait()
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                await client.call_tool(echo, {"text": f"s{n}"})
                done[0] += 1

    began = [0.0]

    async def clock() -> None:
        await ready.wait()
        began[0] = time.perf_counter()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(clock)
        for n in range(sessions):
            nursery.start_soon(one, n)
    return done[0] / max(time.perf_counter() - began[0], 1e-9)


async def correctness(front: Front, names: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    leaked: list[str] = []

    async def listener(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method == "notifications/progress":
            leaked.append(method)

    async with session(front.url) as client, session(front.url, listener) as bystander:
        await bystander.call_tool(names["echo"], {"text": "listening"})
        seen: list[float] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append(value)

        with trio.move_on_after(15):
            steps = {"steps": 3, "interval": 0.02}
            await client.call_tool(names["progress"], steps, progress_callback=progress)  # type: ignore[arg-type]
        await trio.sleep(0.3)
        out["progress"] = seen == [1, 2, 3]
        out["progress_reaches_other_session"] = bool(leaked)

        with trio.move_on_after(0.5):
            await client.call_tool(names["sleep"], {"seconds": 30})
        with trio.move_on_after(3):
            while not front.seen("notifications/cancelled"):  # noqa: ASYNC110 - a file, not an event
                await trio.sleep(0.02)
        out["cancel_reaches_backend"] = front.seen("notifications/cancelled")
    try:
        async with session(front.url) as client:
            out.update(await kill(front, client, names))
    except Exception as exc:  # a front whose session breaks on a backend crash
        out.setdefault("kill_answer", f"session broke: {_leaf(exc)}"[:120])
        out.setdefault("recovered_s", None)
    return out


async def kill(front: Front, client: Client, names: dict[str, str]) -> dict[str, Any]:
    """SIGKILL the backend under a 30 s call: time to the answer, then recovery."""
    out: dict[str, Any] = {}

    async def call() -> str:
        try:
            reply = await client.call_tool(names["sleep"], {"seconds": 30})
        except Exception as exc:  # what a front answers is what we measure
            return f"{type(exc).__name__}: {str(exc)[:80]}"
        return "isError" if reply.is_error else "result"

    killed = await kill_mid_call(front, call, out)
    out["recovered_s"] = None
    with trio.move_on_after(10):
        while True:
            try:
                with trio.fail_after(2):
                    reply = await client.call_tool(names["echo"], {"text": "back?"})
                if not reply.is_error:
                    out["recovered_s"] = round(time.perf_counter() - killed, 2)
                    break
            except Exception as exc:
                out["recover_error"] = f"{type(exc).__name__}: {str(exc)[:80]}"
            await trio.sleep(0.25)
    return out


async def measure_front(
    name: str, code: Path, calls: int, sessions: int, seconds: float, checks: bool
) -> dict[str, Any]:
    """Start front ``name`` (and the SDK's HTTP backend if it needs one), measure it, stop it."""
    with tempfile.TemporaryDirectory(prefix="bench-fronts-") as tmp:
        scratch = Path(tmp)
        backend, backend_url = None, ""
        if name in NEED_HTTP_BACKEND:
            http_port = free_port()
            backend = subprocess.Popen(  # noqa: ASYNC220 - before anything is measured
                [sys.executable, HTTP_SERVER, str(http_port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            _wait_port(http_port, backend, "the SDK's HTTP server")
            backend_url = f"http://127.0.0.1:{http_port}/mcp"
        front: Front | None = None
        try:
            front = Front(name, scratch, backend_url, code)
            front.start()
            how = measure_ws if name == "supergateway-ws" else measure
            return await how(front, calls, sessions, seconds, checks)
        except Exception as exc:  # a peer that cannot be installed, a front that breaks
            return {"error": _leaf(exc)}
        finally:
            if front is not None:
                front.stop()
            if backend is not None:
                os.killpg(backend.pid, signal.SIGKILL)
                backend.wait()
