"""One-shot clients (``GatewayCore.find_by_name``): with more tools than
``tool_search``'s threshold, a gateway client's ``tools/call`` by the exact name of a
tool its session could find activates it (later listings show it, list_changed is sent)
and then goes through trust, in both eras; hidden and unknown names stay ``unknown
tool``; the admin API and the embedding keep the frozen-turn rule; a one-shot pipe to
the stdio front. The README's inspector commands past the threshold are run in
``tests/end_to_end/test_readme_inspector.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

from actors.spec import ServerSpec
from supervisor import Supervisor
from supervisor.gateway.core import GatewayCore, RequestContext
from supervisor.gateway.results import ERROR_META, INVALID_PARAMS, JsonRpcError
from supervisor.sessions.approvals import ApprovalRequest
from supervisor.settings.model import Config, TrustRule, TrustSettings
from tests.gateway.test_gateway_core import Recorder
from tests.gateway.test_gateway_notices import LIST_CHANGED, client
from tests.gateway.test_gateway_stateless import gateway as stateless
from tests.gateway.test_gateway_stateless import request
from tests.gateway.test_stdio_front import CLI, INITIALIZE, mini, rpc, write_config
from tests.service.test_embedding import mini_spec
from tests.support.admin import admin_running

EXTRA_TOOLS = 25
"""mini_server's 9 tools plus these: over tool_search's threshold of 20 (``auto``)."""


def many(**options: object) -> ServerSpec:
    return mini_spec("mini", "--tools", str(EXTRA_TOOLS), python=sys.executable, **options)


def config(*rules: TrustRule) -> Config:
    return Config(servers=(many(),), trust=TrustSettings(rules=rules))


async def names(core: GatewayCore) -> list[str]:
    listed = await core.handle("tools/list", {}, RequestContext())
    return [tool["name"] for tool in listed["tools"]]


async def call(core: GatewayCore, name: str, **arguments: object) -> dict[str, object]:
    return await core.handle("tools/call", {"name": name, "arguments": arguments}, RequestContext())


async def test_a_call_by_exact_name_runs_activates_and_is_listed_next(tmp_path: Path) -> None:
    async with Supervisor.open(config(), state_dir=tmp_path) as sup, sup.session() as session:
        core = GatewayCore(session)
        activations: list[None] = []
        core.on_activation = lambda: activations.append(None)
        assert await names(core) == ["tool_search"]
        assert await call(core, "mini_echo", text="hi") == {
            "content": [{"type": "text", "text": "hi"}],
            "isError": False,
        }
        assert activations == [None] and "mini_echo" in session.activated
        assert await names(core) == ["mini_echo", "tool_search"]
        # Shown now: calling it again activates nothing more.
        assert (await call(core, "mini_echo", text="again"))["isError"] is False
        assert activations == [None]


async def test_a_client_that_never_listed_calls_by_name(tmp_path: Path) -> None:
    """The one-shot client: initialize, tools/call, gone (no tools/list, no search)."""
    async with Supervisor.open(config(), state_dir=tmp_path) as sup, sup.session() as session:
        core = GatewayCore(session, prefix=False)
        assert (await call(core, "tool_7"))["isError"] is False
        assert "mini_tool_7" in session.activated


async def test_the_call_goes_through_trust_ask_is_asked_and_deny_denied(tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> str:
        asked.append(request)
        return "allow"

    rules = (
        TrustRule("mcp:mini:add", "*", "ask"),
        TrustRule("mcp:mini:echo", "secret*", "deny"),  # some calls only: it can be found
    )
    async with Supervisor.open(config(*rules), approver, state_dir=tmp_path) as sup, sup.session() as session:
        core = GatewayCore(session)
        assert await names(core) == ["tool_search"]
        added = await call(core, "mini_add", a=1, b=2)
        assert added["content"] == [{"type": "text", "text": "3"}]
        assert [request.tool for request in asked] == ["mini_add"]
        denied = await call(core, "mini_echo", text="secret plans")
        assert denied["isError"] is True and denied["_meta"] == {ERROR_META: {"code": "denied"}}
        assert (await call(core, "mini_echo", text="plain"))["isError"] is False


async def test_a_hidden_or_unknown_name_stays_unknown_and_activates_nothing(tmp_path: Path) -> None:
    rules = (TrustRule("mcp:mini:fail", "*", "deny"),)  # denied outright: never shown
    async with Supervisor.open(config(*rules), state_dir=tmp_path) as sup, sup.session() as session:
        core = GatewayCore(session)
        activations: list[None] = []
        core.on_activation = lambda: activations.append(None)
        await names(core)
        for name in ("mini_fail", "mini_nope", "nope"):
            with pytest.raises(JsonRpcError) as unknown:
                await call(core, name)
            assert unknown.value.code == INVALID_PARAMS
            assert unknown.value.message == (
                f"unknown tool {name}: this turn does not show it; call tool_search to find it"
            )
        assert activations == [] and not session.activated
        assert await names(core) == ["tool_search"]
        # The same server's other tools are found by name: only the denied one is hidden.
        assert (await call(core, "mini_echo", text="hi"))["isError"] is False
        assert list(session.activated) == ["mini_echo"]


async def test_the_handshake_era_client_hears_list_changed_after_a_call_by_name(tmp_path: Path) -> None:
    async with (
        Supervisor.open(config(), state_dir=tmp_path) as sup,
        sup.session() as session,
        client(sup, session) as c,
    ):
        assert [tool["name"] for tool in (await c.request("tools/list"))["tools"]] == ["tool_search"]
        called = await c.request("tools/call", {"name": "mini_add", "arguments": {"a": 2, "b": 2}})
        assert called["content"] == [{"type": "text", "text": "4"}]
        await c.heard.wait_for([LIST_CHANGED])
        assert "mini_add" in [tool["name"] for tool in (await c.request("tools/list"))["tools"]]


async def test_the_admin_api_and_the_embedding_keep_the_frozen_turn_rule(tmp_path: Path) -> None:
    """The same exact name, in the same supervisor: unknown in an admin API turn and an
    embedding turn, found by a gateway client."""
    async with admin_running(config(), tmp_path) as api:
        http = api.http()
        sid = await http.session()
        turn = await http.turn(sid)
        assert [tool["id"] for tool in turn["tools"]] == ["tool_search"]
        refused = await http.call(sid, turn["turn_id"], "mini_echo", {"text": "hi"})
        assert refused.status == 200 and refused.json()["error"] == {
            "code": "unknown_tool",
            "message": "unknown tool mini_echo: this turn does not show it; call tool_search to find it",
        }
        async with api.sup.session() as session:
            embedded = await (await session.begin_turn()).call("mini_echo", {"text": "hi"})
            assert embedded.error is not None and embedded.error.code == "unknown_tool"
            assert not session.activated
            with trio.fail_after(10):
                found = await call(GatewayCore(session), "mini_echo", text="hi")
            assert found["isError"] is False


async def test_a_new_era_client_calls_by_name_for_its_tenant(tmp_path: Path) -> None:
    """The per-request era: the tenant's shared state is what gets the activation."""
    async with Supervisor.open(config(), state_dir=tmp_path) as sup, stateless(sup) as gw:
        out = Recorder()

        async def listed(tenant: str) -> list[str]:
            answer = await gw.receive(request(1, "tools/list"), out, tenant)
            assert answer is not None
            return [tool["name"] for tool in answer["result"]["tools"]]

        params = {"name": "mini_echo", "arguments": {"text": "hi"}}
        answer = await gw.receive(request(2, "tools/call", params), out, "alice")
        assert answer is not None and answer["result"]["content"] == [{"type": "text", "text": "hi"}]
        assert await listed("alice") == ["mini_echo", "tool_search"]
        assert await listed("bob") == ["tool_search"]


async def test_a_one_shot_pipe_to_the_stdio_front_calls_by_name(tmp_path: Path) -> None:
    """``printf '<initialize>\\n<tools/call>\\n' | mcp-supervisor stdio`` with 34 tools:
    the call by exact name runs without a search, and the front exits."""
    servers = {"mini": {**mini(tmp_path), "args": [*mini(tmp_path)["args"], "--tools", str(EXTRA_TOOLS)]}}
    config = write_config(tmp_path, servers, tool_search={"enabled": "auto"})
    command = [str(CLI), "stdio", "--config", str(config), "--state-dir", str(tmp_path / "state")]
    piped = INITIALIZE + rpc(2, "tools/call", {"name": "mini_add", "arguments": {"a": 1, "b": 2}})
    with trio.fail_after(20):
        done = await trio.run_process(command, stdin=piped, capture_stdout=True, capture_stderr=True)
    answers = {answer["id"]: answer for answer in map(json.loads, done.stdout.splitlines())}
    assert answers[2]["result"]["content"] == [{"type": "text", "text": "3"}], done.stdout
