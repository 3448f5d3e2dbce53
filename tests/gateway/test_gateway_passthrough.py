"""What a new-era client of the gateway gets when a backend answers a call with a
JSON-RPC error (``gateway/results.py`` ``CLIENT_ERRORS``), and the conformance
fixture's diagnostic tools for the stateless scenario (``test_logging_tool``,
``test_streaming_elicitation``), over a real supervisor fronting the fixture
(tests/servers/everything_server.py) over stdio in the per-request era."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.protocol.messages import ErrorObject
from actors.router.envelope import failure
from actors.spec import ServerSpec
from supervisor import Supervisor
from supervisor.gateway.results import ERROR_META, MISSING_CAPABILITY, JsonRpcError, tool_result
from supervisor.gateway.stateless import StatelessGateway, http_status
from supervisor.settings.model import Config, ToolSearchSettings
from tests.gateway.test_gateway_core import Recorder
from tests.gateway.test_gateway_stateless import gateway, request
from tests.support.paths import SERVERS

FIXTURE = str(SERVERS / "everything_server.py")


@pytest.fixture
async def fronted(tmp_path: Path) -> AsyncIterator[StatelessGateway]:
    spec = ServerSpec(
        name="everything", command=(sys.executable, FIXTURE), trusted=True, shutdown_grace_s=0.5
    )
    async with (
        Supervisor.open(
            Config(servers=(spec,), tool_search=ToolSearchSettings(enabled=False)), state_dir=tmp_path
        ) as sup,
        gateway(sup) as gw,
    ):
        with trio.fail_after(20):
            async with sup.session() as session:
                await session.begin_turn()  # starts the server
        yield gw


async def call(
    gw: StatelessGateway, tool: str, caps: Any, out: Recorder | None = None, **extra: Any
) -> dict[str, Any]:
    params = {"name": f"everything_{tool}", "arguments": {}, **extra}
    with trio.fail_after(20):
        answer = await gw.receive(request(9, "tools/call", params, caps), out or Recorder(), "t")
    assert answer is not None and answer["id"] == 9
    return answer


async def test_a_backends_missing_capability_error_reaches_the_client_as_that_error(
    fronted: StatelessGateway,
) -> None:
    refused = await call(fronted, "test_missing_capability", {})
    assert "result" not in refused, refused
    assert refused["error"]["code"] == MISSING_CAPABILITY, refused
    assert refused["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
    assert "sampling" in refused["error"]["message"]
    assert http_status(refused) == 400
    asked = (await call(fronted, "test_missing_capability", {"sampling": {}}))["result"]
    assert asked["resultType"] == "input_required", asked
    said = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
    served = await call(
        fronted,
        "test_missing_capability",
        {"sampling": {}},
        inputResponses={key: said for key in asked["inputRequests"]},
        requestState=asked["requestState"],
    )
    assert served["result"]["isError"] is False, served
    assert served["result"]["content"][0]["text"] == "The client declared sampling; its model said: hi"


def test_other_server_errors_stay_results_the_model_reads() -> None:
    for code in (-32602, -32603, -32601, -32020):
        said = failure("s_t", "server_error", "mcp server s answered", rpc_error=ErrorObject(code, "no"))
        result = tool_result(said)
        assert result["isError"] is True and result["_meta"][ERROR_META] == {"code": "server_error"}
    passed = failure(
        "s_t", "server_error", "x", rpc_error=ErrorObject(MISSING_CAPABILITY, "need it", {"a": 1})
    )
    with pytest.raises(JsonRpcError) as raised:
        tool_result(passed)
    assert (raised.value.code, raised.value.message, raised.value.data) == (
        MISSING_CAPABILITY,
        "need it",
        {"a": 1},
    )


async def test_a_call_without_a_log_level_gets_no_log_messages(fronted: StatelessGateway) -> None:
    out = Recorder()
    answered = await call(fronted, "test_logging_tool", {}, out)
    assert answered["result"]["content"][0]["text"] == "Logging tool completed", answered
    assert not [m for m in out.sent if m.get("method") == "notifications/message"], out.sent


async def test_a_streaming_elicitation_is_an_input_required_result_not_a_request(
    fronted: StatelessGateway,
) -> None:
    out = Recorder()
    first = (await call(fronted, "test_streaming_elicitation", {"elicitation": {}}, out))["result"]
    assert first["resultType"] == "input_required", first
    ((key, asked),) = first["inputRequests"].items()
    assert asked["method"] == "elicitation/create" and "name" in str(asked["params"]["requestedSchema"])
    assert not [m for m in out.sent if "method" in m and not m["method"].startswith("notifications/")]
    answer = {key: {"action": "accept", "content": {"name": "Ada"}}}
    final = await call(
        fronted,
        "test_streaming_elicitation",
        {"elicitation": {}},
        inputResponses=answer,
        requestState=first["requestState"],
    )
    assert final["result"]["content"][0]["text"] == "Hello, Ada!", final
