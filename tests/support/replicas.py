"""Replicas as real ``serve`` processes on loopback, sharing one config file and one
PostgreSQL database: each on a fixed port of its own (so a load balancer's file can
name it), with its own state directory, its log in a file; killed, stopped and started
again under the same id, as an operator would."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

CLI = [sys.executable, "-m", "supervisor.cli"]
LISTENING = re.compile(r"admin api listening url=(\S+)")


def free_ports(count: int) -> list[int]:
    """``count`` loopback ports nobody listens on now."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def cluster_config(path: Path, url: str, servers: Mapping[str, Any], **more: Any) -> Path:
    """One config file every replica reads: the replica id and address come from each
    process's environment (``MCP_REPLICA``, ``MCP_REPLICA_PORT``); the key from a file."""
    key = path.parent / "cluster.key"
    key.write_text(base64.b64encode(b"c" * 32).decode())
    cluster = {
        "replica": "${env:MCP_REPLICA}",
        "keys": ["${file:" + str(key) + "}"],
        "address": "http://127.0.0.1:${env:MCP_REPLICA_PORT}",
        **more.pop("cluster", {}),
    }
    path.write_text(json.dumps({"servers": dict(servers), "store": {"url": url}, "cluster": cluster, **more}))
    return path


@attrs.define
class ReplicaProcess:
    """One ``serve`` replica: ``start`` it, ``kill`` (SIGKILL) or ``stop`` (SIGTERM) it."""

    name: str
    port: int
    config: Path
    state_dir: Path
    logs: Path
    process: trio.Process | None = None
    runs: int = 0
    listening: bool = False
    """Its latest run listens (``start`` returned)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.logs / f"{self.name}-{self.runs}.log"

    async def start(self, timeout_s: float = 30) -> None:
        self.runs += 1
        self.listening = False
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_SUPERVISOR")}
        env |= {"MCP_REPLICA": self.name, "MCP_REPLICA_PORT": str(self.port)}
        argv = [*CLI, "serve", "--config", str(self.config), "--bind", f"127.0.0.1:{self.port}"]
        argv += ["--state-dir", str(self.state_dir)]
        with self.log.open("wb") as sink:
            self.process = await trio.lowlevel.open_process(
                argv, stderr=sink, stdout=subprocess.DEVNULL, env=env
            )
        text = trio.Path(self.log)
        with trio.fail_after(timeout_s):
            while LISTENING.search(await text.read_text()) is None:
                assert self.process.poll() is None, await text.read_text()
                await trio.sleep(0.05)
        self.listening = True

    async def kill(self) -> None:
        """SIGKILL: no drain, no goodbye (its heartbeat row simply stops)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def stop(self, timeout_s: float = 60) -> int:
        """SIGTERM, and wait for the drain to end; its exit status."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        with trio.fail_after(timeout_s):
            return await self.process.wait()

    def text(self) -> str:
        return "\n".join(
            (self.logs / f"{self.name}-{run}.log").read_text(errors="replace")
            for run in range(1, self.runs + 1)
        )


def replicas(count: int, config: Path, root: Path) -> list[ReplicaProcess]:
    """``r1`` … ``rN`` on free ports, each with a state directory of its own."""
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    return [
        ReplicaProcess(f"r{i}", port, config, root / f"state-r{i}", logs)
        for i, port in enumerate(free_ports(count), start=1)
    ]
