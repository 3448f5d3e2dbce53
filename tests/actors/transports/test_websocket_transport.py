"""The ``websocket`` client transport (``actors/transports/websocket.py``) against a hub
of our own (``tests/support/bridge_hub.py``: the envelope on loopback, a real stdio child or a
FakeServer per session): calls, progress, cancellation and server requests through
the tunnel; a hub killed mid-call; refused opens; the token never logged."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors.connection.actor import ConnectionActor
from actors.connection.messages import (
    CallFailed,
    CallOutcome,
    CallSucceeded,
    CallTool,
    ConnectionMessage,
    Published,
    StateChanged,
)
from actors.connection.states import State
from actors.protocol.session import ProgressReceived
from actors.spec import ServerSpec, Start
from actors.transports.connector import TransportConnector
from actors.transports.stdio import StdioConnector
from actors.transports.websocket import open_websocket_transport
from supervisor import Supervisor, load_config
from tests.actors.transports.test_stdio_transport import eventually
from tests.conftest import MINI_SERVER
from tests.end_to_end.test_everything_surface import FORM_TOOL, ROOTS_TOOL, ROUTED, SAMPLING_TOOL
from tests.end_to_end.test_real_peers import EVERYTHING
from tests.support.bridge_hub import Backends, MiniHub, running_hub
from tests.support.fakes import MODERN_DISCOVER, FakeServer, FakeSession

TOKEN = "planted-bridge-token-5f3a9c71"
MINI = ServerSpec("mini", command=(sys.executable, str(MINI_SERVER)))


def bridged(hub: MiniHub, server_name: str, *, token: str = TOKEN, **settings: Any) -> ServerSpec:
    """A ``type: websocket`` spec as the loader makes it from ``token``."""
    return ServerSpec(
        "bridged",
        type="websocket",
        url=hub.url,
        server_name=server_name,
        headers={"Authorization": f"Bearer {token}"},
        secrets=(f"Bearer {token}", token),
        start=Start.EAGER,
        **settings,
    )


def write_config(tmp_path: Path, hub: MiniHub, **servers: dict[str, Any]) -> Path:
    config = tmp_path / "config.json"
    doc = {"mcpServers": servers, "tool_search": {"enabled": False}}
    for entry in servers.values():
        entry.setdefault("url", hub.url)
    config.write_text(json.dumps(doc))
    return config


@asynccontextmanager
async def actor_on(spec: ServerSpec) -> AsyncIterator[tuple[trio.MemorySendChannel[ConnectionMessage], Any]]:
    send, receive = trio.open_memory_channel[ConnectionMessage](64)
    publish, published = trio.open_memory_channel[Published](1000)
    actor = ConnectionActor(spec, TransportConnector(), receive, publish)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        yield send, published
        nursery.cancel_scope.cancel()


async def state(published: trio.MemoryReceiveChannel[Published], wanted: State) -> StateChanged:
    with trio.fail_after(20):
        while True:
            event = await published.receive()
            if isinstance(event, StateChanged) and event.state is wanted:
                return event


async def call(mailbox: trio.MemorySendChannel[ConnectionMessage], tool: str, args: Any) -> CallOutcome:
    reply, answers = trio.open_memory_channel[CallOutcome](1)
    await mailbox.send(CallTool(tool, args, reply))
    return await answers.receive()


async def test_calls_progress_validation_and_cancellation_through_the_bridge(tmp_path: Path) -> None:
    async with running_hub({"mini": (StdioConnector(), MINI)}, TOKEN) as hub:
        entry = {
            "transport": "websocket",
            "serverName": "mini",
            "token": "${env:BRIDGE_TOKEN}",
            "trusted": True,
        }
        config = load_config(write_config(tmp_path, hub, bridged=entry), environ={"BRIDGE_TOKEN": TOKEN})
        async with Supervisor.open(config, state_dir=tmp_path / "state") as sup, sup.session() as session:
            with trio.fail_after(20):
                turn = await session.begin_turn()
            assert {"bridged_echo", "bridged_sleep", "bridged_progress"} <= {t.id for t in turn.tools}
            echoed = await turn.call("bridged_echo", {"text": "through the tunnel"})
            assert echoed.ok and echoed.text == "through the tunnel", echoed

            invalid = await turn.call("bridged_add", {"a": "one", "b": 2})  # refused before the hub
            assert invalid.error is not None and invalid.error.code == "invalid_arguments"
            assert [c["params"]["name"] for c in hub.jsonrpc("tools/call")] == ["echo"]

            progress, steps = trio.open_memory_channel[ProgressReceived](10)
            counted = await turn.call("bridged_progress", {"steps": 3, "interval": 0.01}, progress=progress)
            assert counted.ok, counted
            assert [steps.receive_nowait().progress for _ in range(3)] == [1, 2, 3]

            async with trio.open_nursery() as nursery:
                nursery.start_soon(turn.call, "bridged_sleep", {"seconds": 30})
                await eventually(lambda: len(hub.jsonrpc("tools/call")) == 3)
                nursery.cancel_scope.cancel()  # the caller gives up
            sleep_id = hub.jsonrpc("tools/call")[-1]["id"]
            await eventually(lambda: bool(hub.jsonrpc("notifications/cancelled")))
            assert hub.jsonrpc("notifications/cancelled")[0]["params"]["requestId"] == sleep_id
            assert (await turn.call("bridged_echo", {"text": "still fine"})).ok
        # leaving ends the bridge session (the hub ends the child; the leak check sees it)
        assert hub.frames[-1].type == "mcp:session:close"
        assert hub.opened == ["mini"]


async def test_server_requests_round_trip_through_the_tunnel(tmp_path: Path) -> None:
    if not EVERYTHING.exists():
        reason = "npm is not on PATH" if shutil.which("npm") is None else ".ci/setup could not install it"
        pytest.skip(f"@modelcontextprotocol/server-everything is not installed: {reason}")
    everything = ServerSpec("everything", command=(str(EVERYTHING), "stdio"))
    asked: list[tuple[str, Any]] = []

    async def sampling(server: str, params: Any) -> dict[str, Any]:
        asked.append(("sampling/createMessage", params))
        content = {"type": "text", "text": "sampled at the far end"}
        return {"role": "assistant", "content": content, "model": "m", "stopReason": "endTurn"}

    async def elicitation(server: str, params: Any) -> dict[str, Any]:
        asked.append(("elicitation/create", params))
        return {"action": "accept", "content": {"name": "bridged name"}}

    async def roots(server: str, params: Any) -> list[dict[str, str]]:
        asked.append(("roots/list", params))
        return [{"uri": "file:///work/bridged", "name": "bridged root"}]

    async with running_hub({"everything": (StdioConnector(), everything)}, TOKEN) as hub:
        entry = {"type": "websocket", "server_name": "everything", "token": TOKEN, "trusted": True}
        config = load_config(write_config(tmp_path, hub, everything=entry))
        async with Supervisor.open(config, state_dir=tmp_path / "state", client_capabilities=ROUTED) as sup:
            with trio.fail_after(20):
                async with sup.session() as starter:
                    await starter.begin_turn()
                await sup.router.cell.wait_until(
                    lambda c: {SAMPLING_TOOL, FORM_TOOL, ROOTS_TOOL} <= set(c.tools)
                )
            async with sup.session(sampling=sampling, elicitation=elicitation, roots=roots) as session:
                turn = await session.begin_turn()
                sampled = await turn.call(SAMPLING_TOOL, {"prompt": "a prompt from afar"})
                assert sampled.ok and "sampled at the far end" in sampled.text, sampled
                form = await turn.call(FORM_TOOL, {})
                assert form.ok and "bridged name" in form.text, form
                listed = await turn.call(ROOTS_TOOL, {})
                assert listed.ok and "file:///work/bridged" in listed.text, listed
                progress, steps = trio.open_memory_channel[ProgressReceived](10)
                long = await turn.call(
                    "everything_trigger-long-running-operation",
                    {"duration": 0.2, "steps": 2},
                    progress=progress,
                )
                assert long.ok and steps.receive_nowait().total == 2, long
    assert [method for method, _ in asked] == ["sampling/createMessage", "elicitation/create", "roots/list"]
    assert "a prompt from afar" in json.dumps(asked[0][1])


def hanging_calls(release: trio.Event) -> Any:
    async def handler(session: FakeSession, request: Any) -> dict[str, Any] | None:
        if request.params["name"] == "echo":
            return {"content": [{"type": "text", "text": "echo"}]}
        await release.wait()
        return None

    return handler


async def test_a_killed_hub_answers_calls_at_once_and_the_schedule_brings_it_back(
    thread_safe_clock: trio.testing.MockClock,
) -> None:
    """On virtual time, with a FakeServer of the per-request era behind the hub (so
    that era goes through the tunnel too): the call in flight is answered the moment
    the hub dies, not at its 30 s timeout; the attempts follow the 1, 2 s schedule;
    the first turn after the hub is back is healthy."""
    server = FakeServer([{"name": "echo", "inputSchema": {"type": "object"}}, {"name": "slow"}])
    server.discover = MODERN_DISCOVER
    server.call_handler = hanging_calls(trio.Event())
    backends: Backends = {"fake": (server.connector, ServerSpec("fake"))}
    spec_settings = {"reconnect_schedule_s": (1.0, 2.0, 5.0), "call_timeout_s": 30.0}
    async with trio.open_nursery() as hubs:
        hub = MiniHub(backends, TOKEN)
        await hubs.start(hub.serve)
        async with actor_on(bridged(hub, "fake", **spec_settings)) as (mailbox, published):
            steady = await state(published, State.STEADY)
            assert steady.protocol_version == "2026-07-28"
            reply, answers = trio.open_memory_channel[CallOutcome](1)
            await mailbox.send(CallTool("slow", {}, reply))
            await eventually(lambda: len(server.calls()) == 1)

            killed_at = trio.current_time()
            await hub.kill()
            outcome = await answers.receive()
            assert isinstance(outcome, CallFailed) and outcome.code == "unavailable", outcome
            assert trio.current_time() - killed_at < 1.0  # against a 30 s call timeout
            dropped = await state(published, State.BACKOFF)
            assert "the bridge at ws://127.0.0.1" in (dropped.reason or "")
            assert "closed the connection (1006 ABNORMAL_CLOSURE)" in (dropped.reason or "")
            assert dropped.next_retry_at == pytest.approx(dropped.at + 1.0, abs=0.1)  # jittered

            refused = await state(published, State.BACKOFF)  # the hub is still down
            assert refused.at == pytest.approx(dropped.at + 1.0, abs=0.1)
            assert "cannot connect to the bridge at ws://127.0.0.1" in (refused.reason or "")
            assert refused.next_retry_at == pytest.approx(refused.at + 2.0, abs=0.2)
            await hubs.start(hub.serve)  # back, on the same port

            back = await state(published, State.STEADY)
            assert back.at - refused.at == pytest.approx(2.0, abs=0.5)
            assert len(server.connect_times) == 2
            again = await call(mailbox, "echo", {})
            assert isinstance(again, CallSucceeded), again
        hubs.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("server_name", "token", "reason"),
    [
        (
            "nope",
            TOKEN,
            "mcp server bridged: the bridge at {url} refused to open 'nope': "
            "no server 'nope' is exported through the bridge (not_exported)",
        ),
        (
            "mini",
            "wrong-token-0000",
            "mcp server bridged: authentication failed: the bridge at {url} refused the token "
            "(HTTP 401); check the server's 'token'",
        ),
    ],
)
async def test_a_refused_open_names_the_server_and_the_reason(
    server_name: str, token: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with (
        running_hub({"mini": (StdioConnector(), MINI)}, TOKEN) as hub,
        actor_on(bridged(hub, server_name, token=token)) as (mailbox, published),
    ):
        failed = await state(published, State.BACKOFF)
        assert failed.reason == reason.format(url=hub.url)
        refused = await call(mailbox, "echo", {})
        assert isinstance(refused, CallFailed) and refused.code == "unavailable"
    assert hub.opened == []
    assert token not in caplog.text


async def test_the_token_never_reaches_a_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A planted token, through a whole session and a refused one, at DEBUG for every
    logger (trio-websocket's included): never in a log line or a server's status."""
    caplog.set_level(logging.DEBUG)
    async with running_hub({"mini": (StdioConnector(), MINI)}, TOKEN) as hub:
        good = {"type": "websocket", "serverName": "mini", "token": TOKEN, "trusted": True, "start": "eager"}
        bad = {**good, "serverName": "missing"}
        config = load_config(write_config(tmp_path, hub, good=good, bad=bad))
        async with Supervisor.open(config, state_dir=tmp_path / "state") as sup, sup.session() as session:
            with trio.fail_after(20):
                turn = await session.begin_turn()
                assert (await turn.call("good_echo", {"text": "x"})).ok
                await sup.router.cell.wait_until(lambda c: c.servers["bad"].last_error is not None)
            statuses = repr(sup.servers())
    assert "refused to open 'missing'" in statuses and "bridge session opened" in caplog.text
    assert TOKEN not in caplog.text and TOKEN not in statuses


async def test_a_ping_that_crosses_our_close_frame_is_no_error() -> None:
    """trio-websocket#184: a ping arriving after our close frame made its reader task
    fail with wsproto's LocalProtocolError, out of the transport's block."""
    async with running_hub({"mini": (StdioConnector(), MINI)}, TOKEN) as hub:
        hub.ping_on_close = True  # the hub answers our session close with a ping at once
        with trio.fail_after(20):
            for _ in range(5):
                async with open_websocket_transport(bridged(hub, "mini")) as transport:
                    assert transport.session_id is not None
