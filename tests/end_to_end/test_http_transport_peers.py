"""Remote transports against real third-party HTTP servers, through the embedding API:

- the official ``mcp`` Python SDK's Streamable HTTP app (SSE and JSON answers) and its
  legacy HTTP+SSE app (reached through ``auto``'s fallback), served in-process by
  Hypercorn on Trio;
- ``@modelcontextprotocol/server-everything`` in its ``streamableHttp`` and ``sse``
  modes, as a Node subprocess.

Each skips, saying why, only when its package truly cannot be had here.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from actors.protocol.session import ProgressReceived
from actors.spec import ServerSpec
from supervisor import Supervisor
from supervisor.settings.model import Config
from tests.support.http_processes import free_port, listening_process
from tests.support.paths import REPO

ROOT = REPO
EVERYTHING = ROOT / ".venv" / "node" / "node_modules" / ".bin" / "mcp-server-everything"
START_S = 20.0


def remote(name: str, url: str, **options: Any) -> ServerSpec:
    options.setdefault("trusted", True)
    options.setdefault("shutdown_grace_s", 1.0)
    return ServerSpec(name=name, type="remote", url=url, **options)


def sdk_server(*, grow: bool = False) -> Any:
    """A fresh copy of tests/servers/sdk_server.py's MCPServer (add, shout, count);
    ``grow``: with the tool ``grow``, which publishes the tool ``late`` (its ``--grow``)."""
    if importlib.util.find_spec("mcp") is None:
        pytest.skip("the mcp package is not installed (pip install -e '.[dev]' brings it)")
    spec = importlib.util.spec_from_file_location(
        "sdk_server_copy", ROOT / "tests" / "servers" / "sdk_server.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if grow:
        module.server.tool()(module.grow)
    return module.server


@asynccontextmanager
async def hypercorn_app(app: Any) -> AsyncIterator[str]:
    """Serve an ASGI app on 127.0.0.1 (port 0) for the block; yields http://host:port."""
    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 0.2
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(functools.partial(serve, app, config))
        yield binds[0]
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("json_response", [False, True])
async def test_official_sdk_streamable_http_server(tmp_path: Path, json_response: bool) -> None:
    app = sdk_server().streamable_http_app(json_response=json_response)
    async with hypercorn_app(app) as base:
        spec = remote("sdk", f"{base}/mcp", transport="streamable-http")
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            with trio.fail_after(START_S):
                turn = await s.begin_turn()
            assert {"sdk_add", "sdk_shout", "sdk_count"} <= {t.id for t in turn.tools}
            added = await turn.call("sdk_add", {"a": 2, "b": 40})
            assert added.ok and added.text == "42" and added.structured == {"result": 42}, added
            progress_send, progress_receive = trio.open_memory_channel[ProgressReceived](100)
            counted = await turn.call("sdk_count", {"steps": 3}, progress=progress_send)
            assert counted.ok and counted.text == "counted to 3", counted
            if not json_response:  # progress travels on the call's SSE answer stream
                assert progress_receive.receive_nowait().total == 3
            status = await sup.connection_status("sdk")
            assert status is not None and status.transport == f"streamable-http {base}/mcp"


async def test_calls_reuse_the_http_connection_when_the_answer_stream_ends(tmp_path: Path) -> None:
    """The SDK's server ends each request's SSE stream right after the answer: read to
    that end, the connection goes back to the pool (a stream cut short would close it,
    and every call would pay for a new TCP connection)."""
    app = sdk_server().streamable_http_app()
    clients: list[tuple[str, int]] = []

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            clients.append(tuple(scope["client"]))  # the client's port names its TCP connection
        await app(scope, receive, send)

    async with hypercorn_app(counting) as base:
        spec = remote("sdk", f"{base}/mcp", transport="streamable-http")
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            with trio.fail_after(START_S):
                turn = await s.begin_turn()
                before = len(clients)
                for n in range(20):
                    shouted = await turn.call("sdk_shout", {"text": f"call {n}"})
                    assert shouted.ok and shouted.text == f"CALL {n}", shouted
    calls = clients[before : before + 20]
    assert len(calls) == 20
    assert len(set(calls)) <= 2, f"{len(set(calls))} TCP connections for 20 sequential calls"


async def test_official_sdk_legacy_sse_server_through_auto_fallback(tmp_path: Path) -> None:
    app = sdk_server().sse_app()
    async with hypercorn_app(app) as base:
        spec = remote("old", f"{base}/sse")  # transport "auto"
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            with trio.fail_after(START_S):
                turn = await s.begin_turn()
            shouted = await turn.call("old_shout", {"text": "quiet"})
            assert shouted.ok and shouted.text == "QUIET", shouted
            status = await sup.connection_status("old")
            assert status is not None and status.transport == f"sse {base}/sse"


@asynccontextmanager
async def everything(mode: str) -> AsyncIterator[str]:
    """server-everything in an HTTP mode on a free loopback port; yields its base URL."""
    if not EVERYTHING.exists():
        reason = "npm is not on PATH" if shutil.which("npm") is None else ".ci/setup could not install it"
        pytest.skip(f"@modelcontextprotocol/server-everything is not installed: {reason}")
    port = free_port()
    env = {**os.environ, "PORT": str(port)}  # it takes its port from the environment
    async with listening_process([str(EVERYTHING), mode], port, f"mcp-server-everything {mode}", env):
        yield f"http://127.0.0.1:{port}"


async def test_server_everything_streamable_http(tmp_path: Path) -> None:
    async with everything("streamableHttp") as base:
        spec = remote("every", f"{base}/mcp")
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            with trio.fail_after(START_S):
                turn = await s.begin_turn()
            ids = {t.id for t in turn.tools}
            assert "every_echo" in ids
            echoed = await turn.call("every_echo", {"message": "hello"})
            assert echoed.ok and echoed.text == "Echo: hello", echoed
            long_running = "every_trigger-long-running-operation"
            if long_running in ids:
                progress_send, progress_receive = trio.open_memory_channel[ProgressReceived](100)
                result = await turn.call(long_running, {"duration": 0.5, "steps": 2}, progress=progress_send)
                assert result.ok, result
                assert progress_receive.receive_nowait().total == 2
            assert sup.servers()["every"].available


async def test_server_everything_legacy_sse_through_auto_fallback(tmp_path: Path) -> None:
    async with everything("sse") as base:
        spec = remote("every", f"{base}/sse")
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            with trio.fail_after(START_S):
                turn = await s.begin_turn()
            echoed = await turn.call("every_echo", {"message": "old"})
            assert echoed.ok and echoed.text == "Echo: old", echoed
            status = await sup.connection_status("every")
            assert status is not None and status.transport == f"sse {base}/sse"
