"""The gateway's front for per-request-era clients (``supervisor/gateway/stateless.py``)
at the class level, over a real supervisor and real server processes: ``_meta`` on
every request, ``server/discover``, ``scope: session`` servers refused with the reason,
a hang-up as a cancel, ``subscriptions/listen``."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from actors.protocol.messages import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
)
from actors.spec import Scope
from supervisor import Supervisor
from supervisor.gateway.listen import SUBSCRIPTION_ID
from supervisor.gateway.results import ERROR_META, INVALID_PARAMS, METHOD_NOT_FOUND
from supervisor.gateway.stateless import UNAVAILABLE_META, StatelessGateway, header_refusal, http_status
from tests.actors.transports.test_stdio_transport import eventually
from tests.gateway.test_gateway_core import Recorder
from tests.service.test_embedding import config_of, mini_spec

VERSION = "2026-07-28"


def meta(capabilities: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {
        META_PROTOCOL_VERSION: VERSION,
        META_CLIENT_INFO: {"name": "test-client", "version": "1"},
        META_CLIENT_CAPABILITIES: dict(capabilities or {}),
    }


def request(
    request_id: Any, method: str, params: Mapping[str, Any] | None = None, caps: Any = None
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**(params or {}), "_meta": meta(caps)},
    }


@asynccontextmanager
async def gateway(sup: Supervisor, **options: Any) -> AsyncIterator[StatelessGateway]:
    gw = StatelessGateway.of(sup, version="9.9")
    for name, value in options.items():
        setattr(gw, name, value)
    async with trio.open_nursery() as nursery:
        await nursery.start(gw.run)
        yield gw
        nursery.cancel_scope.cancel()


async def test_every_request_is_checked_for_its_meta_and_version(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini", python=sys.executable))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, gateway(sup) as gw:
        out = Recorder()
        bare = await gw.receive(
            {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}, out, "t"
        )
        assert bare is not None and bare["id"] == 1 and bare["error"]["code"] == INVALID_PARAMS
        assert META_PROTOCOL_VERSION in bare["error"]["message"]
        no_caps = {"_meta": {META_PROTOCOL_VERSION: VERSION}}
        lacking = await gw.receive(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": no_caps}, out, "t"
        )
        assert lacking is not None and lacking["error"]["code"] == INVALID_PARAMS
        assert META_CLIENT_CAPABILITIES in lacking["error"]["message"]
        old = {"_meta": {**meta(), META_PROTOCOL_VERSION: "v999.0.0"}}
        refused = await gw.receive(
            {"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": old}, out, "t"
        )
        assert refused is not None and refused["error"]["code"] == -32022
        assert refused["error"]["data"] == {"supported": [VERSION], "requested": "v999.0.0"}
        for method in ("initialize", "ping", "logging/setLevel", "resources/subscribe", "unknown/method"):
            gone = await gw.receive(request(4, method), out, "t")
            assert gone is not None and gone["error"]["code"] == METHOD_NOT_FOUND, method
        no_info = {"_meta": {k: v for k, v in meta().items() if k != META_CLIENT_INFO}}
        served = await gw.receive(
            {"jsonrpc": "2.0", "id": 5, "method": "server/discover", "params": no_info}, out, "t"
        )
        assert served is not None and "result" in served
        assert len(gw.tenants) == 1  # the refusals opened no tenant state; the first served request did


async def test_discover_lists_and_calls_answer_as_the_era_shapes_them(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini", python=sys.executable))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, gateway(sup) as gw:
        out = Recorder()
        found = await gw.receive(request(1, "server/discover"), out, "t")
        assert found is not None
        result = found["result"]
        assert result["supportedVersions"] == [VERSION]
        assert result["capabilities"] == {"tools": {"listChanged": True}}
        assert result["_meta"][META_SERVER_INFO] == {"name": "mcp-supervisor", "version": "9.9"}
        assert (result["resultType"], result["ttlMs"], result["cacheScope"]) == ("complete", 0, "private")
        listed = await gw.receive(request(2, "tools/list"), out, "t")
        assert listed is not None
        assert {"mini_echo", "mini_add"} <= {tool["name"] for tool in listed["result"]["tools"]}
        assert (
            listed["result"]["cacheScope"] == "private" and UNAVAILABLE_META not in listed["result"]["_meta"]
        )
        called = await gw.receive(
            request(3, "tools/call", {"name": "mini_echo", "arguments": {"text": "hi"}}), out, "t"
        )
        assert called is not None
        assert called["result"]["content"] == [{"type": "text", "text": "hi"}]
        assert called["result"]["resultType"] == "complete" and "ttlMs" not in called["result"]
        unknown = await gw.receive(request(4, "tools/call", {"name": "mini_nope", "arguments": {}}), out, "t")
        assert unknown is not None and unknown["error"]["code"] == INVALID_PARAMS


async def test_scope_session_servers_are_unavailable_with_the_reason(tmp_path: Path) -> None:
    shared = mini_spec("mini", python=sys.executable)
    private = mini_spec("priv", python=sys.executable, scope=Scope.SESSION)
    async with Supervisor.open(config_of(shared, private), state_dir=tmp_path) as sup, gateway(sup) as gw:
        out = Recorder()
        listed = await gw.receive(request(1, "tools/list"), out, "t")
        assert listed is not None
        names = {tool["name"] for tool in listed["result"]["tools"]}
        assert "mini_echo" in names and not any(name.startswith("priv_") for name in names)
        why = listed["result"]["_meta"][UNAVAILABLE_META]["priv"]
        assert "scope: session" in why and "initialize" in why
        called = await gw.receive(
            request(2, "tools/call", {"name": "priv_echo", "arguments": {"text": "x"}}), out, "t"
        )
        assert called is not None and called["result"]["isError"] is True
        assert called["result"]["_meta"][ERROR_META] == {"code": "unavailable"}
        assert "scope: session" in called["result"]["content"][0]["text"]
        assert "priv" not in sup.router.cell.current.view_for(gw.tenants.get("t").session.id).servers  # type: ignore[union-attr]


async def test_a_hang_up_cancels_the_call_and_the_backend_is_told(tmp_path: Path) -> None:
    methods = tmp_path / "methods.log"
    config = config_of(mini_spec("mini", "--methods-log", str(methods), python=sys.executable))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, gateway(sup) as gw:
        out = Recorder()
        await gw.receive(request(1, "tools/list"), out, "t")
        with trio.move_on_after(0.5) as hung_up:  # the front cancels the task of the request
            await gw.receive(
                request(2, "tools/call", {"name": "mini_sleep", "arguments": {"seconds": 30}}), out, "t"
            )
        assert hung_up.cancelled_caught
        with trio.fail_after(5):
            await eventually(
                lambda: "notifications/cancelled" in (methods.read_text() if methods.exists() else "")
            )
            state = gw.tenants.get("t")
            await eventually(lambda: state is None or not state.parked)


async def test_listen_acknowledges_and_carries_the_tenants_list_changes(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini", python=sys.executable))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, gateway(sup) as gw:
        out, narrow = Recorder(), Recorder()
        await gw.receive(request(1, "tools/list"), Recorder(), "t")
        async with trio.open_nursery() as nursery:
            wanted = {"notifications": {"toolsListChanged": True, "promptsListChanged": True}}
            nursery.start_soon(gw.receive, request("L-1", "subscriptions/listen", wanted), out, "t")
            only_prompts = {"notifications": {"promptsListChanged": True}}
            nursery.start_soon(gw.receive, request("L-2", "subscriptions/listen", only_prompts), narrow, "t")
            with trio.fail_after(5):
                await eventually(lambda: len(out.sent) >= 1 and len(narrow.sent) >= 1)
            ack = out.sent[0]
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            # the gateway serves no prompts here: only what it honours is agreed
            assert ack["params"] == {
                "notifications": {"toolsListChanged": True},
                "_meta": {SUBSCRIPTION_ID: "L-1"},
            }
            assert narrow.sent[0]["params"]["notifications"] == {}
            added = {"name": "mini_add_tool", "arguments": {"name": "fresh"}}
            await gw.receive(request(2, "tools/call", added), Recorder(), "t")
            with trio.fail_after(5):
                await eventually(lambda: len(out.sent) >= 2)
            changed = out.sent[1]
            assert changed["method"] == "notifications/tools/list_changed"
            assert changed["params"]["_meta"] == {SUBSCRIPTION_ID: "L-1"}
            await trio.sleep(0.2)
            assert len(narrow.sent) == 1  # filtered out: no tools notification on a prompts-only stream
            nursery.cancel_scope.cancel()  # both clients hang up


async def test_listen_without_a_filter_object_is_refused(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini", python=sys.executable))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, gateway(sup) as gw:
        answer = await gw.receive(request(1, "subscriptions/listen", {"notifications": 3}), Recorder(), "t")
        assert answer is not None and answer["error"]["code"] == INVALID_PARAMS
        assert "notifications" in json.dumps(answer["error"])


def test_the_http_front_gets_the_eras_statuses_and_header_check() -> None:
    listed = request(1, "tools/list")
    assert header_refusal(listed, VERSION) is None
    missing = header_refusal(listed, None)
    assert missing is not None and missing["error"]["code"] == -32020 and missing["id"] == 1
    differs = header_refusal(
        {**listed, "params": {"_meta": {**meta(), META_PROTOCOL_VERSION: "v9"}}}, VERSION
    )
    assert differs is not None and "differs" in differs["error"]["message"]
    assert header_refusal({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}, VERSION) is None
    assert http_status(None) == 202
    assert http_status({"jsonrpc": "2.0", "id": 1, "result": {}}) == 200
    for code, status in (
        (-32602, 400),
        (-32022, 400),
        (-32021, 400),
        (-32020, 400),
        (-32601, 404),
        (-32603, 200),
    ):
        assert http_status({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "m"}}) == status


async def test_an_unknown_resource_is_invalid_params_naming_the_uri(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini", python=sys.executable))
    async with Supervisor.open(config, state_dir=tmp_path) as sup, gateway(sup) as gw:
        uri = "test://nonexistent-resource-for-conformance-testing"
        answer = await gw.receive(request(1, "resources/read", {"uri": uri}), Recorder(), "t")
        assert answer is not None and answer["error"]["code"] == INVALID_PARAMS
        assert answer["error"]["data"]["uri"] == uri
