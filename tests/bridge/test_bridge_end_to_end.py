"""Supervisor A uses supervisor B's real ``/v1/bridge`` hub (``type: websocket``), not
the stand-in hub of tests/support/bridge_hub.py: calls, progress, cancellation and server
requests through the tunnel to A's session handlers against
``@modelcontextprotocol/server-everything``; both protocol eras; and B, a ``serve``
subprocess, SIGKILLed under calls in flight: A answers them at once, reconnects on its
schedule, and no server process of B is left."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.connection.states import State
from actors.protocol.session import ProgressReceived
from actors.router.catalog import ServerView
from actors.router.envelope import Envelope
from actors.spec import ServerSpec, Start
from actors.transports.instances import instance_is_live, instances_dir
from supervisor import Supervisor
from supervisor.settings.model import Config, ToolSearchSettings
from tests.actors.transports.test_parent_death import CLI, marked_by
from tests.actors.transports.test_stdio_transport import eventually
from tests.end_to_end.test_everything_surface import (
    FORM_TOOL,
    ROOTS_TOOL,
    ROUTED,
    SAMPLING_TOOL,
    Everything,
    supervisor_level,
)
from tests.support.admin import Running
from tests.support.bridge import EVERYTHING, bridge_url, exported, hub_running, ws_url
from tests.support.paths import SERVERS

pytestmark = pytest.mark.real_peer

TOKEN = "b-hub-token-e2e-0123456789"
SDK_SERVER = str(SERVERS / "sdk_server.py")
LONG_TOOL = "everything_trigger-long-running-operation"
SCHEDULE = (1.0, 2.0, 5.0)


def needs_everything() -> None:
    if not EVERYTHING.exists():
        reason = "npm is not on PATH" if shutil.which("npm") is None else ".ci/setup could not install it"
        pytest.skip(f"@modelcontextprotocol/server-everything is not installed: {reason}")


def bridged(url: str, name: str, server_name: str, **settings: Any) -> ServerSpec:
    """A's ``type: websocket`` entry for B's export ``server_name``, as the loader makes it."""
    return ServerSpec(
        name,
        type="websocket",
        url=url,
        server_name=server_name,
        headers={"Authorization": f"Bearer {TOKEN}"},
        secrets=(f"Bearer {TOKEN}", TOKEN),
        trusted=True,
        start=Start.EAGER,
        **settings,
    )


def a_config(*specs: ServerSpec) -> Config:
    return Config(servers=specs, tool_search=ToolSearchSettings(enabled=False))


@asynccontextmanager
async def b_exporting(state_dir: Path, *specs: ServerSpec) -> AsyncIterator[Running]:
    """Supervisor B in this process, its real hub served by Hypercorn on loopback."""
    async with hub_running(state_dir, *specs, tokens={TOKEN: "alice"}) as running:
        yield running


def logged_stdin(log: Path) -> tuple[str, ...]:
    """server-everything behind a ``tee`` of its stdin: what the backend really read."""
    return ("sh", "-c", 'tee -a "$0" | exec "$1" stdio', str(log), str(EVERYTHING))


def lines_of(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


@asynccontextmanager
async def a_through_b(tmp_path: Path) -> AsyncIterator[Everything]:
    """B (in-process) exports server-everything; A reaches it as server ``everything``
    and routes server requests to its sessions' handlers (``Everything.handlers``).
    Yields once the server's own roots/list (after ``initialized``, tied to no call)
    reached A's supervisor-level handler, so a later one is a call's."""
    needs_everything()
    stdin_log = tmp_path / "backend-stdin.jsonl"
    asked: list[tuple[str, str, Any]] = []
    untied_roots = trio.Event()
    async with b_exporting(tmp_path / "b", exported("everything", *logged_stdin(stdin_log))) as b:
        spec = bridged(ws_url(b), "everything", "everything")
        async with Supervisor.open(
            a_config(spec),
            state_dir=tmp_path / "a",
            server_requests=supervisor_level(asked, untied_roots),
            client_capabilities=ROUTED,
        ) as sup:
            everything = Everything(sup, asked, untied_roots)
            await everything.ready()
            yield everything


async def test_calls_progress_cancellation_and_server_requests_through_the_real_hub(tmp_path: Path) -> None:
    stdin_log = tmp_path / "backend-stdin.jsonl"
    async with (
        a_through_b(tmp_path) as everything,
        everything.sup.session(**everything.handlers("A")) as session,
    ):
        with trio.fail_after(30):
            turn = await session.begin_turn()
            echoed = await turn.call("everything_echo", {"message": "A through B"})
            assert echoed.ok and "A through B" in echoed.text, echoed
            summed = await turn.call("everything_get-sum", {"a": 2, "b": 40})
            assert summed.ok and "42" in summed.text, summed

            progress, steps = trio.open_memory_channel[ProgressReceived](10)
            long = await turn.call(LONG_TOOL, {"duration": 0.2, "steps": 2}, progress=progress)
            assert long.ok, long
            reported = [steps.receive_nowait() for _ in range(2)]
            assert [(p.progress, p.total) for p in reported] == [(1, 2), (2, 2)]

            sampled = await turn.call(SAMPLING_TOOL, {"prompt": "a prompt from A"})
            assert sampled.ok and "sampled by A" in sampled.text, sampled
            form = await turn.call(FORM_TOOL, {})
            assert form.ok and "name-A" in form.text, form
            listed = await turn.call(ROOTS_TOOL, {})
            assert listed.ok and "file:///work/A" in listed.text, listed
            asked = everything.of("A")
            assert [method for method, _ in asked] == [
                "sampling/createMessage",
                "elicitation/create",
                "roots/list",
            ]
            assert "a prompt from A" in json.dumps(asked[0][1])

            async with trio.open_nursery() as nursery:
                nursery.start_soon(turn.call, LONG_TOOL, {"duration": 60, "steps": 60})
                await eventually(lambda: len(long_calls(stdin_log)) == 2)
                nursery.cancel_scope.cancel()  # A's caller gives up
            cancelled_id = long_calls(stdin_log)[-1]["id"]
            await eventually(lambda: bool(cancels(stdin_log)))
            assert cancels(stdin_log) == [cancelled_id]  # the backend read it
            assert (await turn.call("everything_echo", {"message": "still fine"})).ok


def long_calls(stdin_log: Path) -> list[dict[str, Any]]:
    """The ``tools/call`` requests of the long-running tool the backend read."""
    return [
        m
        for m in lines_of(stdin_log)
        if m.get("method") == "tools/call" and m["params"]["name"] == "trigger-long-running-operation"
    ]


def cancels(stdin_log: Path) -> list[Any]:
    """The request ids of the ``notifications/cancelled`` the backend read."""
    return [
        m["params"]["requestId"] for m in lines_of(stdin_log) if m.get("method") == "notifications/cancelled"
    ]


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_both_protocol_eras_pass_through_the_real_hub(tmp_path: Path, era: str) -> None:
    """The hub never reads the session, so the era is A's and the backend's business:
    the SDK server speaks both; A pins one."""
    async with b_exporting(tmp_path / "b", exported("sdk", sys.executable, SDK_SERVER)) as b:
        spec = bridged(ws_url(b), "sdk", "sdk", protocol=era)
        async with Supervisor.open(a_config(spec), state_dir=tmp_path / "a") as sup, sup.session() as session:
            with trio.fail_after(30):
                turn = await session.begin_turn()
                summed = await turn.call("sdk_add", {"a": 2, "b": 40})
                assert summed.ok and summed.structured == {"result": 42}, summed
                assert sup.servers()["sdk"].protocol_version == era


class ServeB:
    """``mcp-supervisor serve`` exporting server-everything, in a process group of its
    own (so the test can SIGKILL the group), its log in a file."""

    def __init__(self, tmp_path: Path) -> None:
        self.config = tmp_path / "b.json"
        everything = {"command": [str(EVERYTHING), "stdio"], "bridge": True}
        doc = {"servers": {"everything": everything}, "admin": {"tokens": {TOKEN: "alice"}}}
        self.config.write_text(json.dumps(doc))
        self.state = tmp_path / "b-state"
        self.tmp_path = tmp_path
        self.runs: list[trio.Process] = []
        self.instances: list[str] = []
        """Each run's instance id: its servers carry it in their marker."""

    async def start(self, bind: str = "127.0.0.1:0") -> str:
        """Start B; its admin URL once it listens."""
        log = self.tmp_path / f"b-{len(self.runs)}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_SUPERVISOR")}
        argv = [*CLI, "serve", "--config", str(self.config), "--bind", bind, "--state-dir", str(self.state)]
        with log.open("wb") as stderr:
            self.runs.append(
                await trio.lowlevel.open_process(
                    argv, stdin=subprocess.DEVNULL, stderr=stderr, env=env, start_new_session=True
                )
            )
        with trio.fail_after(30):
            while not (found := re.search(r"admin api listening url=(\S+)", log.read_text())):
                assert self.runs[-1].poll() is None, log.read_text()
                await trio.sleep(0.02)
        locks = [p.name.removesuffix(".lock") for p in instances_dir(self.state).glob("*.lock")]
        (live,) = set(locks) - set(self.instances)  # the previous run's lock may still be there
        assert instance_is_live(self.state, live)
        self.instances.append(live)
        return found[1]

    async def kill(self) -> None:
        """SIGKILL B's whole process group (its servers have groups of their own)."""
        os.killpg(self.runs[-1].pid, signal.SIGKILL)
        with trio.fail_after(10):
            await self.runs[-1].wait()

    async def stop(self) -> None:
        """SIGTERM what still runs (a clean drain), SIGKILL its group if it hangs."""
        with trio.CancelScope(shield=True):
            for run in self.runs:
                if run.poll() is None:
                    run.send_signal(signal.SIGTERM)
                    with trio.move_on_after(20):
                        await run.wait()
                    if run.poll() is None:
                        os.killpg(run.pid, signal.SIGKILL)
                        await run.wait()


async def test_a_sigkilled_hub_answers_calls_at_once_and_a_reconnects_on_its_schedule(tmp_path: Path) -> None:
    """B is SIGKILLed (its whole process group) under two calls in flight: A answers
    them well before their 30 s timeout, waits in backoff on its schedule (about 1, 2,
    5 s: each delay within the default jitter, a tenth of it),
    and is healthy again once B is back on the same port; B's server-everything died
    with B (parent-death signal), so no process of B's is left."""
    needs_everything()
    b = ServeB(tmp_path)
    try:
        url = await b.start()
        port = url.rpartition(":")[2]
        spec = bridged(
            bridge_url(url),
            "everything",
            "everything",
            call_timeout_s=30.0,
            reconnect_schedule_s=SCHEDULE,
        )
        async with Supervisor.open(a_config(spec), state_dir=tmp_path / "a") as sup, sup.session() as session:
            with trio.fail_after(30):
                turn = await session.begin_turn()
                assert (await turn.call("everything_echo", {"message": "before"})).ok
            first_b = b.instances[0]
            assert marked_by(first_b), "B's server-everything carries no marker of B's instance"
            outcomes: list[tuple[float, Envelope]] = []

            async def long_call(progress: trio.MemorySendChannel[ProgressReceived]) -> None:
                outcome = await turn.call(LONG_TOOL, {"duration": 60, "steps": 600}, progress=progress)
                outcomes.append((trio.current_time(), outcome))

            async with trio.open_nursery() as nursery:
                for _ in range(2):
                    progress, steps = trio.open_memory_channel[ProgressReceived](1000)
                    nursery.start_soon(long_call, progress)
                    with trio.fail_after(10):
                        await steps.receive()  # the call runs at the far end
                killed_at = trio.current_time()
                await b.kill()
            assert len(outcomes) == 2
            for answered_at, outcome in outcomes:
                assert answered_at - killed_at < 2.0, outcome  # against a 30 s call timeout
                assert outcome.error is not None and outcome.error.code == "unavailable", outcome
                said = "MCP server stopped responding during tools/call trigger-long-running-operation"
                assert outcome.error.message == said, outcome

            with trio.fail_after(10):
                dropped = await wait_for_view(sup, lambda v: v.state is State.BACKOFF)
            assert "the bridge at ws://127.0.0.1" in (dropped.last_error or ""), dropped
            assert dropped.next_retry_at == pytest.approx(dropped.since + SCHEDULE[0], rel=0.1), dropped
            with trio.fail_after(10):
                await eventually(lambda: not marked_by(first_b))  # server-everything died with B

            backoffs = [dropped]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch_backoffs, sup, backoffs)
                await b.start(f"127.0.0.1:{port}")
                with trio.fail_after(30):
                    back = await wait_for_view(sup, lambda v: v.state is State.STEADY)
                nursery.cancel_scope.cancel()
            for attempt, view in enumerate(backoffs):  # each delay is the schedule's next step
                delay = SCHEDULE[min(attempt, len(SCHEDULE) - 1)]
                assert view.next_retry_at is not None, (attempt, backoffs)
                assert view.next_retry_at - view.since == pytest.approx(delay, rel=0.1), (attempt, backoffs)
            due = backoffs[-1].next_retry_at
            assert due is not None and back.since >= due - 0.05  # not before it was due
            with trio.fail_after(30):
                turn = await session.begin_turn()
                after = await turn.call("everything_echo", {"message": "after"})
            assert after.ok and "after" in after.text, after
    finally:
        await b.stop()
    with trio.fail_after(10):
        await eventually(lambda: not any(marked_by(i) for i in b.instances))


async def wait_for_view(sup: Supervisor, predicate: Callable[[ServerView], bool]) -> ServerView:
    catalog = await sup.router.cell.wait_until(lambda c: predicate(c.servers["everything"]))
    return catalog.servers["everything"]


async def watch_backoffs(sup: Supervisor, seen: list[ServerView]) -> None:
    """Append every new backoff of the server (a new ``since``) to ``seen``."""
    while True:
        seen.append(await wait_for_view(sup, functools.partial(new_backoff, last_since=seen[-1].since)))


def new_backoff(view: ServerView, last_since: float) -> bool:
    return view.state is State.BACKOFF and view.since != last_since
