"""Chaos on real subprocesses: kill, stop, and garble servers; every call still ends once.

Real clock (real processes); every wait is bounded. The autouse leak check in
conftest.py proves afterwards that no child process survived. Remote servers are
tests/servers/sdk_server.py over HTTP (the official SDK's own uvicorn stack), each a
process of its own that the test starts and kills.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.connection.states import State
from actors.protocol.session import ProgressReceived
from actors.router.envelope import Envelope
from actors.spec import ServerSpec, Start
from supervisor import Supervisor
from supervisor.settings.model import Config
from tests.support.http_processes import free_port, listening_process
from tests.support.paths import SERVERS

MINI = str(SERVERS / "mini_server.py")
SDK_SERVER = str(SERVERS / "sdk_server.py")
STOPPED_RESPONDING = "MCP server stopped responding during tools/call {}"


def spec(name: str, *flags: str, **options: Any) -> ServerSpec:
    options.setdefault("shutdown_grace_s", 0.3)
    options.setdefault("trusted", True)  # these tests are about connections, not trust
    options.setdefault("start", Start.EAGER)
    return ServerSpec(name=name, command=(sys.executable, MINI, *flags), **options)


def server_pids(marker: str) -> list[int]:
    """Pids of live processes whose command line contains ``marker``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and MINI.encode() in cmdline and state != "Z":
            pids.append(int(entry))
    return pids


async def wait_for_state(
    sup: Supervisor, name: str, state: State, after_epoch: int = 0, limit: float = 10
) -> int:
    with trio.fail_after(limit):
        catalog = await sup.router.cell.wait_until(
            lambda c: c.epoch > after_epoch and c.servers[name].state is state
        )
    return catalog.epoch


@asynccontextmanager
async def sdk_http_server(*flags: str) -> AsyncIterator[tuple[int, trio.Process]]:
    """tests/servers/sdk_server.py ``--http PORT *flags`` for the block, once it listens;
    yields its port and its process."""
    if importlib.util.find_spec("mcp") is None:
        pytest.skip("the mcp package is not installed (pip install -e '.[dev]' brings it)")
    port = free_port()
    command = [sys.executable, SDK_SERVER, "--http", str(port), *flags]
    async with listening_process(command, port, f"sdk_server.py {flags}") as process:
        yield port, process


def remote(port: int, flags: tuple[str, ...], protocol: str = "auto") -> ServerSpec:
    """The spec for an ``sdk_http_server(*flags)``: ``--legacy`` serves HTTP+SSE at /sse."""
    legacy = "--legacy" in flags
    return ServerSpec(
        protocol=protocol,
        name="far",
        type="remote",
        url=f"http://127.0.0.1:{port}/{'sse' if legacy else 'mcp'}",
        transport="sse" if legacy else "streamable-http",
        trusted=True,
        start=Start.EAGER,
        call_timeout_s=30.0,
        shutdown_grace_s=0.3,
    )


def assert_gone(reason: str | None) -> None:
    """The backoff reason of a killed remote server: the connection dropped, or the one
    made right after that was refused (reset, if the dying server's socket took it)."""
    assert reason is not None
    assert reason.startswith("mcp server far: ")
    assert "the connection dropped during" in reason or "cannot connect to" in reason, reason


async def test_sigkill_with_20_calls_in_flight(tmp_path: Path) -> None:
    log = tmp_path / "calls-victim.log"
    config = Config(servers=(spec("victim", "--calls-log", str(log)), spec("bystander")))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        await wait_for_state(sup, "victim", State.STEADY)
        turn = await session.begin_turn()
        results: list[Envelope] = []

        async def call_one() -> None:
            results.append(await turn.call("victim_sleep", {"seconds": 30}))

        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(call_one)
            with trio.fail_after(5):
                while not log.exists() or len(log.read_text().splitlines()) < 20:  # noqa: ASYNC110 - polls a file
                    await trio.sleep(0.02)
            [pid] = server_pids(str(log))
            killed_at = trio.current_time()
            os.kill(pid, signal.SIGKILL)
        answered_in = trio.current_time() - killed_at
        assert answered_in < 1.0, answered_in
        assert len(results) == 20
        assert {r.as_dict()["error"]["message"] for r in results} == {
            "MCP server stopped responding during tools/call sleep"
        }
        # the bystander never noticed
        assert sup.servers()["bystander"].state is State.STEADY
        # the victim comes back on schedule (first retry after 1 s) and serves again
        epoch = await wait_for_state(sup, "victim", State.BACKOFF)
        backoff_view = sup.router.cell.current.servers["victim"]
        assert backoff_view.next_retry_at is not None
        assert backoff_view.next_retry_at - backoff_view.since == pytest.approx(1.0, abs=0.1)  # jittered
        await wait_for_state(sup, "victim", State.STEADY, epoch)
        later = await (await session.begin_turn()).call("victim_echo", {"text": "back"})
        assert later.ok and later.text == "back"


async def test_sigstop_ends_in_timeouts_and_a_restart(tmp_path: Path) -> None:
    log = tmp_path / "calls-frozen.log"
    config = Config(
        servers=(spec("frozen", "--calls-log", str(log), call_timeout_s=0.5, ping_timeout_s=0.5),)
    )
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        await wait_for_state(sup, "frozen", State.STEADY)
        turn = await session.begin_turn()
        assert (await turn.call("frozen_echo", {"text": "warm"})).ok
        [pid] = server_pids(str(log))
        os.kill(pid, signal.SIGSTOP)
        try:
            with trio.fail_after(3):
                result = await turn.call("frozen_echo", {"text": "hello?"})
            assert result.error is not None and result.error.code == "timeout"
            epoch = await wait_for_state(sup, "frozen", State.BACKOFF, limit=3)
            reason = sup.servers()["frozen"].last_error
            assert reason is not None and "did not answer ping" in reason
            await wait_for_state(sup, "frozen", State.STEADY, epoch, limit=5)
            assert pid not in server_pids(str(log))  # the hung process was killed and reaped
            assert (await (await session.begin_turn()).call("frozen_echo", {"text": "new"})).ok
        finally:
            if pid in server_pids(str(log)):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    "flags",
    [
        # The answer streams carry event ids, so the client resumes them: the resume is
        # refused at once, which means the server is gone (it used to retry for ~3 s).
        ("--resumable",),
        (),
        ("--legacy",),
    ],
    ids=["streamable-http-resumable", "streamable-http", "legacy-sse"],
)
async def test_sigkill_of_a_remote_server_with_calls_in_flight(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    async with sdk_http_server(*flags) as (port, process):
        config = Config(servers=(remote(port, flags),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
            await wait_for_state(sup, "far", State.STEADY, limit=20)
            # The SDK 2.3 server speaks the per-request era over Streamable HTTP.
            era = "2025-11-25" if "--legacy" in flags else "2026-07-28"
            assert sup.servers()["far"].protocol_version == era
            turn = await session.begin_turn()
            results: list[Envelope] = []
            progress_send, progress_receive = trio.open_memory_channel[ProgressReceived](10)

            async def call_one() -> None:
                results.append(await turn.call("far_sleep", {"seconds": 30}, progress=progress_send))

            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(call_one)
                with trio.fail_after(10):
                    for _ in range(3):  # each call reached the server, its answer stream is open
                        await progress_receive.receive()
                killed_at = trio.current_time()
                process.kill()
            answered_in = trio.current_time() - killed_at
            assert answered_in < 1.0, answered_in
            messages = [r.as_dict()["error"]["message"] for r in results]
            assert messages == [STOPPED_RESPONDING.format("sleep")] * 3
            await wait_for_state(sup, "far", State.BACKOFF, limit=1.0)
            assert_gone(sup.servers()["far"].last_error)


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_sigkill_of_an_idle_remote_server_is_noticed_at_once(tmp_path: Path, protocol: str) -> None:
    """No call in flight: the stream for server messages breaks off, and reopening it
    is refused (it used to be retried for ~3 s, after each retry delay). That stream is
    the GET stream in the handshake era, the subscriptions/listen stream in the
    per-request era (which, before it existed, noticed only at the next request)."""
    async with sdk_http_server() as (port, process):
        config = Config(servers=(remote(port, (), protocol=protocol),))
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            epoch = await wait_for_state(sup, "far", State.STEADY, limit=20)
            assert sup.servers()["far"].protocol_version == protocol
            await trio.sleep(0.5)  # the answer streams end; the notification stream stays
            process.kill()
            await wait_for_state(sup, "far", State.BACKOFF, after_epoch=epoch, limit=1.0)
            assert_gone(sup.servers()["far"].last_error)


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (("--garbage",), "broke the protocol"),
        (("--huge-line", str(10 * 1024 * 1024)), "line longer than"),
        (("--exit-during-init",), "closed the connection"),
    ],
    ids=["garbage", "10MB-line", "exit-during-initialize"],
)
async def test_a_misbehaving_server_fails_only_itself(
    tmp_path: Path, flags: tuple[str, ...], reason: str
) -> None:
    config = Config(servers=(spec("bad", *flags), spec("good")))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        await wait_for_state(sup, "bad", State.BACKOFF)
        last_error = sup.servers()["bad"].last_error
        assert last_error is not None and reason in last_error
        await wait_for_state(sup, "good", State.STEADY)
        turn = await session.begin_turn()
        assert (await turn.call("good_echo", {"text": "fine"})).ok
        # it never got as far as listing tools, so it has none in the turn, and is down
        assert not turn.catalog.servers["bad"].available
        assert not [t for t in turn.tools if t.server == "bad"]
        bad = await turn.call("bad_echo", {"text": "x"})
        assert bad.as_dict()["error"]["code"] == "unknown_tool"


async def test_cancelling_the_supervisor_leaves_no_process(tmp_path: Path) -> None:
    config = Config(
        servers=(
            spec("stubborn", "--ignore-stdin-close", "--ignore-sigterm", "--spawn-child"),
            spec("plain"),
        )
    )
    with trio.move_on_after(1.5):
        async with Supervisor.open(config, state_dir=tmp_path) as sup:
            await wait_for_state(sup, "stubborn", State.STEADY)
            await trio.sleep_forever()
    # conftest's leak check asserts that the server, its grandchild and the plain server are gone
