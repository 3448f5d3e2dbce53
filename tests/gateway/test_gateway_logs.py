"""Server log messages through the gateway, across eras: each client hears what its own
level asks for (a handshake-era client's ``logging/setLevel``, a 2026-07-28 client's
request ``_meta`` level), whichever era the backend speaks; a message tied to a call
comes on that call's stream. The conformance fixture (tests/servers/everything_server.py,
``test_tool_with_logging``: three info messages) over stdio, in each era, with no
``log_level`` set (the server's own stays warning: our log takes none of them)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.protocol.messages import META_LOG_LEVEL
from actors.spec import ServerSpec
from supervisor import Supervisor
from supervisor.settings.model import Config, ToolSearchSettings
from tests.actors.transports.test_stdio_transport import eventually
from tests.gateway.test_gateway_core import Recorder
from tests.gateway.test_gateway_notices import Client, client
from tests.gateway.test_gateway_stateless import gateway, request
from tests.service.test_embedding import config_of, mini_spec
from tests.support.paths import SERVERS

FIXTURE = str(SERVERS / "everything_server.py")
SAID = ["Tool execution started", "Tool processing data", "Tool execution completed"]


@asynccontextmanager
async def fixture(tmp_path: Path, protocol: str) -> AsyncIterator[Supervisor]:
    spec = ServerSpec(
        name="everything",
        command=(sys.executable, FIXTURE),
        trusted=True,
        protocol=protocol,
        shutdown_grace_s=0.5,
    )
    config = Config(servers=(spec,), tool_search=ToolSearchSettings(enabled=False))
    async with Supervisor.open(config, state_dir=tmp_path) as sup:
        yield sup


def logged(messages: list[Mapping[str, Any]]) -> list[tuple[str, Any]]:
    return [
        (m["params"]["level"], m["params"]["data"])
        for m in messages
        if m.get("method") == "notifications/message"
    ]


async def call_logging_tool(c: Client) -> Recorder:
    """Call ``test_tool_with_logging``; its stream (the outlet of its request)."""
    stream = Recorder()
    message = {"jsonrpc": "2.0", "id": 99, "method": "tools/call"}
    message["params"] = {"name": "everything_test_tool_with_logging", "arguments": {}}
    answer = await c.peer.receive(message, stream)
    assert answer is not None and answer["result"]["isError"] is False, answer
    return stream


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"], ids=["new-era-backend", "handshake-backend"])
async def test_each_handshake_era_client_hears_what_its_own_level_asks_for(
    tmp_path: Path, protocol: str
) -> None:
    async with (
        fixture(tmp_path, protocol) as sup,
        sup.session() as session_a,
        sup.session() as session_b,
        client(sup, session_a) as a,
        client(sup, session_b) as b,
    ):
        await a.request("logging/setLevel", {"level": "info"})  # b keeps warning, the default
        with trio.fail_after(20):
            stream = await call_logging_tool(a)
            heard = [*logged(stream.sent), *logged(a.heard.sent)]
            while len(heard) < 3:  # the standalone stream's may come just after the answer
                await trio.sleep(0.05)
                heard = [*logged(stream.sent), *logged(a.heard.sent)]
        era = sup.servers()["everything"].protocol_version
        assert era == ("2026-07-28" if protocol == "auto" else "2025-11-25")
        assert heard == [("info", text) for text in SAID]
        if protocol == "auto":  # tied to the call: on its stream
            assert logged(stream.sent) == heard
        await trio.sleep(0.3)
        assert logged(b.heard.sent) == [], "b asked for warning and above"


async def test_a_new_era_client_hears_the_messages_of_a_request_that_asked_on_its_stream(
    tmp_path: Path,
) -> None:
    async with fixture(tmp_path, "auto") as sup, gateway(sup) as gw:
        params = {"name": "everything_test_tool_with_logging", "arguments": {}}
        asked, quiet = request(1, "tools/call", params), request(2, "tools/call", params)
        asked["params"]["_meta"][META_LOG_LEVEL] = "info"
        streams = Recorder(), Recorder()
        with trio.fail_after(20):
            for message, stream in zip((asked, quiet), streams, strict=True):
                answer = await gw.receive(message, stream, "t")
                assert answer is not None and answer["result"]["isError"] is False, answer
        assert logged(streams[0].sent) == [("info", text) for text in SAID]
        assert logged(streams[1].sent) == [], "a request without a level gets none"
        bad = request(3, "tools/call", params)
        bad["params"]["_meta"][META_LOG_LEVEL] = "loud"
        refused = await gw.receive(bad, Recorder(), "t")
        assert refused is not None and refused["error"]["code"] == -32602
        assert f"{META_LOG_LEVEL} must be one of debug, info" in refused["error"]["message"]


async def test_a_client_that_set_no_level_hears_warnings_even_when_our_log_takes_errors_only(
    tmp_path: Path,
) -> None:
    """The handshake era's default is ours to choose: warning and above, asked of the
    servers too, whatever their ``log_level`` (here error: our log takes no warning)."""
    config = config_of(mini_spec("mini", "--flood", python=sys.executable, log_level="error"))
    async with (
        Supervisor.open(config, state_dir=tmp_path) as sup,
        sup.session() as session,
        client(sup, session) as c,
    ):
        c.peer.core.capabilities = lambda: {"tools": {}, "logging": {}}  # type: ignore[method-assign]
        flood = {"name": "mini_flood", "arguments": {"count": 3, "level": "warning"}}
        await c.request("tools/call", flood)
        with trio.fail_after(10):
            await eventually(lambda: len(logged(c.heard.sent)) == 3)
        assert logged(c.heard.sent) == [("warning", f"flood message {n}") for n in range(3)]
