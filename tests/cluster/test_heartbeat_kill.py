"""A real ``serve`` replica on PostgreSQL: killed with SIGKILL, its heartbeat row stops
being alive within its TTL (nobody removes it); stopped with SIGTERM, its row is gone."""

from __future__ import annotations

import base64
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import trio

from supervisor.store.cluster_rows import ReplicaRow
from supervisor.store.postgres import open_postgres
from tests.support.http_processes import free_port, listening_process

TTL_S = 1.0


def rows(url: str) -> list[ReplicaRow]:
    with open_postgres(url) as store:
        return store.replicas()


async def poll(url: str, done: Callable[[list[ReplicaRow]], object], timeout_s: float) -> list[ReplicaRow]:
    """The rows once ``done(rows)`` holds (read every 20 ms over one connection)."""
    with open_postgres(url) as store, trio.fail_after(timeout_s):
        while True:
            found = await trio.to_thread.run_sync(store.replicas)
            if done(found):
                return found
            await trio.sleep(0.02)


async def _replica(tmp_path: Path, url: str, sig: int) -> float:
    """Start replica r1, wait for its live row, send ``sig``; when it was sent."""
    config = tmp_path / "config.json"
    key = base64.b64encode(b"k" * 32).decode()
    cluster = {"replica": "r1", "keys": [key], "heartbeat_s": 0.25, "ttl_s": TTL_S}
    config.write_text(json.dumps({"servers": {}, "store": {"url": url}, "cluster": cluster}))
    port = free_port()
    argv = [sys.executable, "-m", "supervisor.cli", "serve", "--config", str(config)]
    argv += ["--bind", f"127.0.0.1:{port}", "--state-dir", str(tmp_path / "state")]
    async with listening_process(argv, port, "serve") as process:
        (row,) = await poll(url, lambda found: len(found) == 1 and found[0].alive and found[0].address, 10)
        assert (row.id, row.state, row.address) == ("r1", "serving", f"http://127.0.0.1:{port}")
        process.send_signal(sig)
        sent = trio.current_time()
        await process.wait()
    return sent


async def test_a_killed_replicas_heartbeat_stops_being_alive_within_its_ttl(
    tmp_path: Path, postgres_url: str
) -> None:
    sent = await _replica(tmp_path, postgres_url, signal.SIGKILL)
    (row,) = await poll(postgres_url, lambda found: not found[0].alive, TTL_S + 2)
    assert trio.current_time() - sent <= TTL_S + 0.3  # its last beat was before the kill
    assert row.id == "r1" and row.state == "serving"  # nobody said goodbye


async def test_a_replica_stopped_with_sigterm_removes_its_row(tmp_path: Path, postgres_url: str) -> None:
    await _replica(tmp_path, postgres_url, signal.SIGTERM)
    assert await trio.to_thread.run_sync(rows, postgres_url) == []
