"""The gateway's MCP methods over a real session (``supervisor/gateway/core.py``):
namespaced tools from a turn per listing, results passed through, our outcomes as
``isError`` results with their code, progress under the client's own token."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actors.protocol.server_session import InitializeReceived
from supervisor import Supervisor
from supervisor.gateway.core import GatewayCore, RequestContext
from supervisor.gateway.peer import GatewayPeer
from supervisor.gateway.results import (
    ERROR_META,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    JsonRpcError,
)
from tests.actors.transports.test_stdio_transport import eventually
from tests.service.test_embedding import config_of, mini_spec


@pytest.fixture
def python() -> str:
    return sys.executable


class Recorder:
    """An outlet that keeps what it is sent."""

    def __init__(self) -> None:
        self.sent: list[Mapping[str, Any]] = []

    async def send(self, message: Mapping[str, Any]) -> None:
        self.sent.append(message)


async def test_tools_are_listed_namespaced_and_called_through_the_latest_turn(
    tmp_path: Path, python: str
) -> None:
    config = config_of(mini_spec("mini", python=python))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        core = GatewayCore(session)
        listed = await core.handle("tools/list", {}, RequestContext())
        names = [tool["name"] for tool in listed["tools"]]
        assert "mini_echo" in names and "mini_add" in names
        echo = next(tool for tool in listed["tools"] if tool["name"] == "mini_echo")
        assert echo["inputSchema"]["properties"] == {"text": {"type": "string"}}
        assert core.capabilities() == {"tools": {"listChanged": True}}

        result = await core.handle(
            "tools/call", {"name": "mini_echo", "arguments": {"text": "hi"}}, RequestContext()
        )
        assert result == {"content": [{"type": "text", "text": "hi"}], "isError": False}

        failed = await core.handle("tools/call", {"name": "mini_fail", "arguments": {}}, RequestContext())
        assert failed["isError"] is True and ERROR_META not in failed.get("_meta", {})
        assert failed["content"][0]["text"] == "this tool always fails"

        refused = await core.handle(
            "tools/call", {"name": "mini_echo", "arguments": {"text": 3}}, RequestContext()
        )
        assert refused["isError"] is True
        assert refused["_meta"][ERROR_META] == {"code": "invalid_arguments"}

        with pytest.raises(JsonRpcError) as unknown:
            await core.handle("tools/call", {"name": "mini_nope", "arguments": {}}, RequestContext())
        assert unknown.value.code == INVALID_PARAMS and "mini_nope" in unknown.value.message
        with pytest.raises(JsonRpcError) as missing:
            await core.handle("sampling/createMessage", {}, RequestContext())
        assert missing.value.code == METHOD_NOT_FOUND


async def test_progress_goes_to_the_requests_outlet_under_the_clients_token(
    tmp_path: Path, python: str
) -> None:
    config = config_of(mini_spec("mini", python=python))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        core = GatewayCore(session)
        outlet = Recorder()
        ctx = RequestContext(outlet=outlet, progress_token="client-token-7")
        arguments = {"steps": 3, "interval": 0.01}
        result = await core.handle("tools/call", {"name": "mini_progress", "arguments": arguments}, ctx)
        assert result["content"][0]["text"] == "done after 3 steps"
        assert [m["params"]["progress"] for m in outlet.sent] == [1, 2, 3]
        assert {m["params"]["progressToken"] for m in outlet.sent} == {"client-token-7"}
        assert outlet.sent[0]["params"]["total"] == 3


async def test_without_prefix_the_backends_own_names_are_shown(tmp_path: Path, python: str) -> None:
    config = config_of(mini_spec("mini", python=python))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        core = GatewayCore(session, prefix=False)
        listed = await core.handle("tools/list", {}, RequestContext())
        assert "echo" in [tool["name"] for tool in listed["tools"]]
        result = await core.handle(
            "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}, RequestContext()
        )
        assert result["content"] == [{"type": "text", "text": "3"}]


async def test_a_peer_initializes_refuses_early_requests_and_cancels_by_the_clients_id(
    tmp_path: Path, python: str
) -> None:
    calls, methods = tmp_path / "calls.jsonl", tmp_path / "methods.log"
    flags = ("--calls-log", str(calls), "--methods-log", str(methods))
    config = config_of(mini_spec("mini", *flags, python=python))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, sup.session() as session:
        peer = GatewayPeer(session, lambda key: sup.requests.cancel(key, session.tenant))
        outlet = Recorder()
        early = await peer.receive({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, outlet)
        assert early is not None and early["error"]["code"] == INVALID_REQUEST
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
        answer = await peer.receive(
            {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": init}, outlet
        )
        assert answer is not None
        assert answer["result"]["protocolVersion"] == "2025-06-18"
        assert answer["result"]["capabilities"] == {"tools": {"listChanged": True}}
        newer = {**init, "protocolVersion": "2099-01-01"}
        again = await peer.receive(
            {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": newer}, outlet
        )
        assert again is not None and again["error"]["code"] == INVALID_REQUEST

        async with trio.open_nursery() as nursery:
            answers: list[dict[str, Any] | None] = []

            async def slow() -> None:
                call = {"name": "mini_sleep", "arguments": {"seconds": 30}}
                message = {"jsonrpc": "2.0", "id": "c-1", "method": "tools/call", "params": call}
                answers.append(await peer.receive(message, outlet))

            nursery.start_soon(slow)
            with trio.fail_after(10):  # the backend has the call
                await eventually(lambda: calls.exists() and '"sleep"' in calls.read_text())
            cancel = {"requestId": "c-1", "reason": "user"}
            note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
            with trio.fail_after(5):
                assert await peer.receive(note, outlet) is None
        assert answers == [None]  # a cancelled request is not answered
        with trio.fail_after(5):  # the backend call was cancelled
            await eventually(lambda: "notifications/cancelled" in methods.read_text().split())


async def test_a_cancelled_request_with_no_call_behind_it_is_stopped_and_not_answered() -> None:
    """A listing waiting for a server to start has no backend call to cancel: the
    peer stops its work itself, and later cancels of it (or of unknown ids) are
    ignored."""
    peer = GatewayPeer(_Stub(), lambda key: False)  # type: ignore[arg-type]
    init = {"protocolVersion": "2025-11-25"}
    handshake = peer.mcp.receive({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    assert isinstance(handshake, InitializeReceived)  # accepted here: the stub has no turns
    peer.mcp.accept_initialize(handshake, capabilities={}, server_info={})
    stopped = trio.Event()

    async def waits_for_ever(method: str, params: Any, ctx: RequestContext) -> dict[str, Any]:
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError("unreachable")

    peer.core.handle = waits_for_ever  # type: ignore[method-assign]
    answers: list[dict[str, Any] | None] = []

    async def listing() -> None:
        answers.append(await peer.receive({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, Recorder()))

    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(listing)
            await trio.testing.wait_all_tasks_blocked()
            assert await peer.receive(cancel, Recorder()) is None
            await stopped.wait()
    assert answers == [None]
    assert await peer.receive(cancel, Recorder()) is None  # over: nothing to cancel


class _Stub:
    id = "stub-session"
