"""Two ``serve`` processes on one PostgreSQL, one killed with SIGKILL under load: every
call that got an answer has exactly one audit row in PostgreSQL once a new process has
started on the dead one's state directory (issue 34, item 3: audit rows).

Each process keeps its own journal in its own state directory; the rows reach
PostgreSQL in batches behind the answers, so the killed one leaves rows that only its
journal holds. The process started on its state directory claims the dead instance
(its lock) and folds that journal before it serves.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import h11
import psycopg
import trio

from supervisor.store import hash_arguments
from tests.support.admin import ALICE, Http, until
from tests.support.paths import SERVERS

CLI = [sys.executable, "-m", "supervisor.cli"]
WORKERS = 8
KILL_AFTER = 150  # answers from the process to kill
THEN = 100  # answers from the other one after the kill


async def _serve(config: Path, state_dir: Path, log: Path) -> tuple[trio.Process, str]:
    """``serve`` on a free loopback port, its log in a file (a pipe nobody reads fills)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_SUPERVISOR")}
    argv = [*CLI, "serve", "--config", str(config), "--bind", "127.0.0.1:0", "--state-dir", str(state_dir)]
    with log.open("wb") as sink:
        process = await trio.lowlevel.open_process(argv, stderr=sink, stdout=subprocess.DEVNULL, env=env)
    text = trio.Path(log)
    with trio.fail_after(30):
        while not (match := re.search(r"admin api listening url=(\S+)", await text.read_text())):
            assert process.poll() is None, await text.read_text()
            await trio.sleep(0.05)
    return process, match.group(1)


async def _load(url: str, name: str, answered: list[str], done: trio.Event) -> None:
    """``WORKERS`` tasks calling ``mini_echo`` until ``done`` or the process dies; each
    answered call's text is appended the moment its answer arrived."""
    http = Http(url, ALICE)

    async def worker(k: int) -> None:
        sid = await http.session()
        tid = (await http.turn(sid))["turn_id"]
        n = 0
        while not done.is_set():
            text = f"{name}-{k}-{n}"
            n += 1
            killed = False
            try:
                reply = await http.call(sid, tid, "mini_echo", {"text": text})
            except* (OSError, trio.BrokenResourceError, h11.RemoteProtocolError):
                killed = True
            if killed:
                return  # this call got no answer
            assert reply.status == 200 and reply.json()["ok"] is True, reply
            answered.append(text)

    async with trio.open_nursery() as nursery:
        for k in range(WORKERS):
            nursery.start_soon(worker, k)


def _rows(url: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(url) as connection:
        return connection.execute("SELECT record, args_sha256, outcome FROM audit").fetchall()


def _digest(text: str) -> str:
    return hash_arguments({"text": text})[0]


def _missing(url: str, answered: list[str]) -> list[str]:
    """The answered calls that have no ``ok`` row in PostgreSQL."""
    ok = {digest for _, digest, outcome in _rows(url) if outcome == "ok"}
    return [text for text in answered if _digest(text) not in ok]


async def test_kill_9_of_one_of_two_supervisors_under_load_loses_no_answered_calls_row(
    tmp_path: Path, postgres_url: str
) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "servers": {
                    "mini": {
                        "command": [sys.executable, str(SERVERS / "mini_server.py")],
                        "start": "eager",
                        "trusted": True,
                    }
                },
                "admin": {"tokens": {ALICE: "alice"}},
                "store": {"url": postgres_url},
            }
        )
    )
    state_a, state_b = tmp_path / "a", tmp_path / "b"
    a, url_a = await _serve(config, state_a, tmp_path / "a.log")
    b, url_b = await _serve(config, state_b, tmp_path / "b.log")
    answered_a: list[str] = []
    answered_b: list[str] = []
    try:
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_load, url_a, "a", answered_a, done)
            nursery.start_soon(_load, url_b, "b", answered_b, done)
            await until(lambda: len(answered_a) >= KILL_AFTER // 3, 60)
            # Hold the audit table so the rows of the calls answered from now on wait in
            # the journals only (as on a slow or busy database), then kill one process.
            with psycopg.connect(postgres_url) as holder:
                holder.execute("LOCK TABLE audit IN EXCLUSIVE MODE")
                held_at = len(answered_a)
                await until(lambda: len(answered_a) >= KILL_AFTER, 60)
                a.send_signal(signal.SIGKILL)
                with trio.fail_after(10):
                    await a.wait()
                holder.rollback()
            killed_at = len(answered_b)
            await until(lambda: len(answered_b) >= killed_at + THEN, 60)
            done.set()
        assert os.listdir(state_a / "journal"), "the dead process left its journal"
        assert _missing(postgres_url, answered_a[held_at:]), "rows answered while the table was held wait"
        b.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            assert await b.wait() == 0
        # A new process on the dead one's state directory folds its journal as it starts.
        c, _ = await _serve(config, state_a, tmp_path / "c.log")
        c.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            assert await c.wait() == 0
    finally:
        for process in (a, b):
            if process.poll() is None:
                process.kill()
                with trio.CancelScope(shield=True):
                    await process.wait()

    rows = _rows(postgres_url)
    assert len({record for record, _, _ in rows}) == len(rows), "a journal line was folded twice"
    per_call = Counter(digest for _, digest, _ in rows)
    for name, answered in (("killed", answered_a), ("surviving", answered_b)):
        missing = _missing(postgres_url, answered)
        assert not missing, (
            f"{len(missing)} of {len(answered)} answered calls of the {name} process have no row"
        )
        twice = [text for text in answered if per_call[_digest(text)] != 1]
        assert not twice, f"calls of the {name} process with two rows: {twice[:5]}"
    assert not os.listdir(state_a / "journal"), "the new process folded the dead one's journal and deleted it"
