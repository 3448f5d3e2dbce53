"""Traces through every way in (issue 30): a SERVER span for each request ``/mcp`` (both
eras), the stdio front and the admin API's call endpoints receive, its parent the
client's context (``params._meta`` first, else the ``traceparent`` header), and for a
request passed on to a server our span and the CLIENT span under it, in one trace.
The embedding API has no SERVER span: the host's own span is the parent."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from actors.spec import ServerSpec, Start
from supervisor import Supervisor
from supervisor.gateway.stdio_front import lines, serve_stdio
from supervisor.settings.model import TrustRule, TrustSettings
from tests.gateway.test_gateway_stateless import VERSION
from tests.gateway.test_gateway_stateless import request as new_era_request
from tests.support.admin import Running, admin_running, config_of, mini_spec, until
from tests.support.gateway_http import McpHttp, initialize
from tests.support.gateway_http import request as rpc
from tests.support.paths import SERVERS
from tests.support.traces import Traces

Send = Callable[[str, dict[str, Any], str], Awaitable[dict[str, Any]]]
"""One request (method, params, traceparent) by one way in; its answer."""

PARENT_SPAN = "b7ad6b7169203331"


def traceparent(n: int) -> str:
    return f"00-{n:032x}-{PARENT_SPAN}-01"


def with_meta(params: dict[str, Any], parent: str) -> dict[str, Any]:
    return {**params, "_meta": {**params.get("_meta", {}), "traceparent": parent}}


@asynccontextmanager
async def surface(tmp_path: Path) -> AsyncIterator[Running]:
    spec = mini_spec("mini", "--surface")
    async with admin_running(config_of(spec), tmp_path) as api:
        yield api


async def handshake_http(api: Running) -> Send:
    mcp = McpHttp(api.http())
    await mcp.open()

    async def send(method: str, params: dict[str, Any], parent: str) -> dict[str, Any]:
        reply = await mcp.post(rpc(1, method, with_meta(params, parent)), accept="application/json")
        answer: dict[str, Any] = reply.json()
        return answer

    return send


async def new_era_http(api: Running) -> Send:
    http = api.http()

    async def send(method: str, params: dict[str, Any], parent: str) -> dict[str, Any]:
        headers = {"Accept": "application/json", "MCP-Protocol-Version": VERSION, "Mcp-Method": method}
        named = params.get("name", params.get("uri"))
        if isinstance(named, str):
            headers["Mcp-Name"] = named
        message = new_era_request(1, method, params)
        message["params"]["_meta"]["traceparent"] = parent
        answer: dict[str, Any] = (await http.request("POST", "/mcp", json=message, headers=headers)).json()
        return answer

    return send


def rpc_line(request_id: Any, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps(rpc(request_id, method, params)).encode() + b"\n"


@asynccontextmanager
async def stdio(api: Running) -> AsyncIterator[Send]:
    stdin_send, stdin = trio.testing.memory_stream_pair()
    stdout, stdout_receive = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(serve_stdio, api.sup, stdin, stdout, eof_grace_s=0.3))
        answers = lines(stdout_receive, 1 << 20)
        await stdin_send.send_all(json.dumps(initialize(0)).encode() + b"\n")
        await anext(answers)

        async def send(method: str, params: dict[str, Any], parent: str) -> dict[str, Any]:
            await stdin_send.send_all(rpc_line(1, method, with_meta(params, parent)))
            answer: dict[str, Any] = json.loads(await anext(answers))  # type: ignore[arg-type]
            return answer

        yield send
        await stdin_send.aclose()


def spans_of(traces: Traces, n: int) -> list[ReadableSpan]:
    return [span for span in traces.spans() if span.context.trace_id == n]


def ancestors(span: ReadableSpan, spans: list[ReadableSpan]) -> list[str]:
    """The names above ``span``, nearest first, within ``spans``."""
    by_id = {each.context.span_id: each for each in spans}
    names = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        above = by_id[parent.span_id]
        names.append(above.name)
        parent = above.parent
    return names


# method, params, the span's target, the CLIENT span a server gets (None: answered by us)
HANDSHAKE = [
    ("ping", {}, "", None),
    ("tools/list", {}, "", None),
    ("tools/call", {"name": "mini_echo", "arguments": {"text": "hi"}}, "mini_echo", "tools/call echo"),
    ("resources/list", {}, "", None),
    ("resources/templates/list", {}, "", None),
    ("resources/read", {"uri": "mini://notes"}, "mini://notes", "resources/read mini://notes"),
    ("prompts/list", {}, "", None),
    ("prompts/get", {"name": "mini_greet", "arguments": {"who": "Ada"}}, "mini_greet", "prompts/get greet"),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "mini_greet"},
                             "argument": {"name": "who", "value": "A"}}, "", None),
    ("logging/setLevel", {"level": "info"}, "", None),
]  # fmt: skip
NEW_ERA = [("server/discover", {}, "", None)] + [
    row for row in HANDSHAKE if row[0] not in ("ping", "logging/setLevel", "completion/complete")
]


@pytest.mark.parametrize("way", ["mcp-2025-11-25", "mcp-2026-07-28", "stdio"])
async def test_every_request_a_front_receives_is_a_server_span_under_the_clients(
    tmp_path: Path, traces: Traces, way: str
) -> None:
    table = NEW_ERA if way == "mcp-2026-07-28" else HANDSHAKE
    async with surface(tmp_path) as api, trio.open_nursery() as nursery:
        if way == "stdio":
            front = stdio(api)
            send = await front.__aenter__()
        else:
            send = await (handshake_http(api) if way == "mcp-2025-11-25" else new_era_http(api))
        with trio.fail_after(30):
            for n, (method, params, _, _) in enumerate(table, start=1):
                answer = await send(method, params, traceparent(n))
                assert "result" in answer or method == "completion/complete", (method, answer)
        if way == "stdio":
            await front.__aexit__(None, None, None)
        nursery.cancel_scope.cancel()
    transport = "pipe" if way == "stdio" else "tcp"
    for n, (method, _, target, forwarded) in enumerate(table, start=1):
        spans = spans_of(traces, n)
        name = f"{method} {target}" if target else method
        server = [span for span in spans if span.kind is SpanKind.SERVER]
        assert [span.name for span in server] == [name], (method, [span.name for span in spans])
        (received,) = server
        assert received.parent is not None and f"{received.parent.span_id:016x}" == PARENT_SPAN
        attributes = dict(received.attributes or {})
        assert attributes["mcp.method.name"] == method
        assert attributes["jsonrpc.request.id"] == "1"
        assert attributes["network.transport"] == transport
        if way == "mcp-2025-11-25":
            assert isinstance(attributes["mcp.session.id"], str)
        else:
            assert "mcp.session.id" not in attributes  # stdio and the new era have none
        if way != "stdio":
            assert attributes["mcp.protocol.version"] == (
                "2025-11-25" if way == "mcp-2025-11-25" else VERSION
            )
            assert attributes["client.address"] == "127.0.0.1"
        client = [span for span in spans if span.kind is SpanKind.CLIENT]
        if forwarded is None:
            assert client == [], (method, [span.name for span in client])
            continue
        assert [span.name for span in client] == [forwarded]
        assert ancestors(client[0], spans)[-1] == name  # under the SERVER span, ours between
        assert "error.type" not in (client[0].attributes or {})
    assert traces.counter.open == 0


async def test_the_admin_apis_call_endpoints_are_server_spans_under_the_traceparent_header(
    tmp_path: Path, traces: Traces
) -> None:
    async with surface(tmp_path) as api:
        http = api.http()
        sid = await http.session()
        tid = (await http.turn(sid))["turn_id"]
        base = f"/v1/sessions/{sid}/turns/{tid}"
        requests = [
            ("tools/call", "mini_echo", "/calls", {"tool": "mini_echo", "arguments": {"text": "x"}}),
            ("resources/read", "mini://notes", "/resources/read", {"uri": "mini://notes"}),
            ("prompts/get", "mini_greet", "/prompts/get", {"id": "mini_greet", "arguments": {"who": "A"}}),
        ]
        with trio.fail_after(20):
            for n, (_, _, path, body) in enumerate(requests, start=1):
                headers = {"traceparent": traceparent(n)}
                reply = await http.request("POST", base + path, json=body, headers=headers)
                assert reply.status == 200 and reply.json()["ok"], reply
            streamed = await http.request(
                "POST",
                base + "/calls",
                json={"tool": "mini_echo", "arguments": {"text": "y"}},
                headers={"traceparent": traceparent(9), "Accept": "text/event-stream"},
            )
            assert streamed.status == 200, streamed
            completion = {
                "ref": {"type": "ref/prompt", "name": "mini_greet"},
                "argument": {"name": "who", "value": "A"},
            }
            unsupported = await http.request(
                "POST", base + "/completions", json=completion, headers={"traceparent": traceparent(8)}
            )
            assert unsupported.status == 200 and unsupported.json()["error"]["code"] == "unsupported"
    for n, (method, target, _, _) in [
        *enumerate(requests, start=1),
        (9, ("tools/call", "mini_echo", "", "")),
    ]:
        spans = spans_of(traces, n)
        (received,) = [span for span in spans if span.kind is SpanKind.SERVER]
        assert received.name == f"{method} {target}"
        assert received.parent is not None and f"{received.parent.span_id:016x}" == PARENT_SPAN
        (client,) = [span for span in spans if span.kind is SpanKind.CLIENT]
        assert ancestors(client, spans)[-1] == received.name
    assert traces.counter.open == 0


async def test_the_embedding_apis_requests_are_children_of_the_hosts_span(
    tmp_path: Path, traces: Traces
) -> None:
    async with surface(tmp_path) as api, api.sup.session() as session:
        turn = await session.begin_turn()
        host = SpanContext(
            trace_id=5, span_id=int(PARENT_SPAN, 16), is_remote=True, trace_flags=TraceFlags(1)
        )
        with trace.use_span(NonRecordingSpan(host)):
            assert (await turn.call("mini_echo", {"text": "x"})).ok
            assert (await turn.read_resource("mini://notes")).ok
            assert (await turn.get_prompt("mini_greet", {"who": "A"})).ok
    spans = spans_of(traces, 5)
    client = sorted(span.name for span in spans if span.kind is SpanKind.CLIENT)
    assert client == ["prompts/get greet", "resources/read mini://notes", "tools/call echo"]
    ours = sorted(span.name for span in spans if span.kind is SpanKind.INTERNAL)
    assert ours == [
        "mcp_supervisor prompts/get mini_greet",
        "mcp_supervisor resources/read mini://notes",
        "mcp_supervisor tools/call mini_echo",
    ]
    assert traces.counter.open == 0


async def test_a_failed_request_says_why_on_its_server_span(tmp_path: Path, traces: Traces) -> None:
    async with surface(tmp_path) as api:
        send = await handshake_http(api)
        with trio.fail_after(20):
            unknown = await send("tools/call", {"name": "mini_nothing", "arguments": {}}, traceparent(1))
            failed = await send("tools/call", {"name": "mini_fail", "arguments": {}}, traceparent(2))
    assert unknown["error"]["code"] == -32602 and failed["result"]["isError"] is True
    (refused,) = [span for span in spans_of(traces, 1) if span.kind is SpanKind.SERVER]
    assert dict(refused.attributes or {})["error.type"] == "-32602"
    assert dict(refused.attributes or {})["rpc.response.status_code"] == "-32602"
    (tool_error,) = [span for span in spans_of(traces, 2) if span.kind is SpanKind.SERVER]
    assert dict(tool_error.attributes or {})["error.type"] == "tool_error"


async def test_a_request_without_meta_takes_its_parent_from_the_traceparent_header(
    tmp_path: Path, traces: Traces
) -> None:
    async with surface(tmp_path) as api:
        mcp = McpHttp(api.http())
        await mcp.open()
        with trio.fail_after(20):
            reply = await mcp.post(
                rpc(3, "tools/call", {"name": "mini_echo", "arguments": {"text": "x"}}),
                {"traceparent": traceparent(7)},
                accept="application/json",
            )
    assert reply.json()["result"]["isError"] is False
    (received,) = [span for span in spans_of(traces, 7) if span.kind is SpanKind.SERVER]
    assert received.parent is not None and f"{received.parent.span_id:016x}" == PARENT_SPAN


async def test_a_connection_attempt_is_a_span_with_its_first_requests_and_states(
    tmp_path: Path, traces: Traces
) -> None:
    async with surface(tmp_path) as api, api.sup.session() as session:
        turn = await session.begin_turn()  # the server is up: its attempt ended, ready
        assert (await turn.call("mini_echo", {"text": "x"})).ok
    (attempt,) = [span for span in traces.spans() if span.name == "mcp_supervisor connect mini"]
    assert attempt.parent is None and attempt.status.is_ok
    states = [dict(event.attributes or {})["state"] for event in attempt.events]
    assert states[-1] == "steady" and "handshake" in states, states
    lists = sorted(
        span.name
        for span in traces.spans()
        if span.parent is not None and span.parent.span_id == attempt.context.span_id
    )
    # the opening (mini speaks the handshake era: the probe, then initialize, in one span)
    assert lists == [
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "server/discover",
        "tools/list",
    ]
    (opening,) = [span for span in traces.spans() if span.name == "server/discover"]
    assert dict(opening.attributes or {})["mcp.protocol.version"] == "2025-11-25"
    assert traces.counter.open == 0


CHAOS = ["sigkill", "cancelled", "hang-up", "timeout", "busy", "denied"]


@pytest.mark.parametrize("case", CHAOS)
async def test_every_span_through_mcp_ends_whatever_ends_the_call(
    tmp_path: Path, traces: Traces, case: str
) -> None:
    """Zero open spans once a call through ``/mcp`` ended by ``case``; the SERVER
    span says how it ended."""
    calls = tmp_path / "calls.jsonl"
    options: dict[str, Any] = {"call_timeout_s": 0.5} if case == "timeout" else {}
    if case == "busy":
        options["concurrency"] = 1
    spec = mini_spec("mini", "--whoami", "--calls-log", str(calls), **options)
    config = config_of(spec)
    if case == "denied":
        config = attrs.evolve(
            config, trust=TrustSettings(rules=(TrustRule("mcp:mini:sleep", action="deny"),))
        )
    sleep = {"name": "mini_sleep", "arguments": {"seconds": 30}}
    async with admin_running(config, tmp_path) as api:
        mcp = McpHttp(api.http())
        await mcp.open()
        with trio.fail_after(30):
            pid = json.loads(
                (await mcp.call(1, "tools/call", {"name": "mini_whoami"}))["result"]["content"][0]["text"]
            )["pid"]
            if case in ("denied", "timeout"):
                answer = await mcp.call(2, "tools/call", with_meta(sleep, traceparent(2)))
                assert answer["result"]["_meta"]["mcp-supervisor/error"]["code"] == case
            else:
                async with trio.open_nursery() as nursery:
                    hung_up = trio.CancelScope()

                    async def slow() -> None:
                        with hung_up:
                            await mcp.post(rpc(2, "tools/call", with_meta(sleep, traceparent(2))))

                    nursery.start_soon(slow)
                    await until(lambda: calls.exists() and '"sleep"' in calls.read_text())
                    if case == "sigkill":
                        os.kill(pid, signal.SIGKILL)
                    elif case == "cancelled":
                        cancel = {
                            "jsonrpc": "2.0",
                            "method": "notifications/cancelled",
                            "params": {"requestId": 2},
                        }
                        await mcp.post(cancel)
                    elif case == "hang-up":
                        hung_up.cancel()
                    else:
                        echo = {"name": "mini_echo", "arguments": {"text": "x"}}
                        answer = await mcp.call(3, "tools/call", with_meta(echo, traceparent(3)))
                        assert answer["result"]["_meta"]["mcp-supervisor/error"]["code"] == "busy"
                        nursery.cancel_scope.cancel()
            if case not in ("hang-up", "busy"):  # a hang-up is no cancel: the call runs on
                await until(lambda: traces.counter.open == 0)
    assert traces.counter.open == 0, [span.name for span in traces.spans()]  # ended by the stop
    n = 3 if case == "busy" else 2
    (received,) = [span for span in spans_of(traces, n) if span.kind is SpanKind.SERVER]
    expected = {"sigkill": "unavailable", "cancelled": "cancelled", "hang-up": "cancelled"}.get(case, case)
    assert dict(received.attributes or {})["error.type"] == expected, case


CROSS = str(SERVERS / "cross_era_server.py")


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_every_request_we_send_a_server_is_a_client_span(
    tmp_path: Path, traces: Traces, era: str
) -> None:
    """The opening, the lists, a read, a subscription and a log level, to an SDK 2.x
    server pinned to ``era``: each a CLIENT span named by the convention."""
    spec = ServerSpec(
        name="cross",
        command=(sys.executable, CROSS),
        protocol=era,
        trusted=True,
        start=Start.EAGER,
        shutdown_grace_s=0.3,
    )
    async with Supervisor.open(config_of(spec), state_dir=tmp_path) as sup, sup.session() as session:
        with trio.fail_after(30):
            await sup.router.cell.wait_until(lambda catalog: "cross_touch" in catalog.tools)
            turn = await session.begin_turn()
            with traces.tracer.start_as_current_span("host"):
                assert (await turn.read_resource("cross://a", "cross")).ok
                assert (await session.subscribe("cross://a", "cross")).ok
            await session.want_logs("debug")
            opening = "initialize" if era == "2025-11-25" else "server/discover"
            wanted = {opening, "tools/list", "resources/list", "resources/read cross://a"}
            if era == "2025-11-25":  # the new era has no such requests: a listen stream, _meta
                wanted |= {"resources/subscribe cross://a", "logging/setLevel"}
            await until(lambda: wanted <= {s.name for s in traces.spans() if s.kind is SpanKind.CLIENT})
    # by name, the one that was answered (a setLevel overtaken by a newer level is cancelled)
    sent = {
        span.name: span
        for span in traces.spans()
        if span.kind is SpanKind.CLIENT and "error.type" not in (span.attributes or {})
    }
    for name in wanted:
        attributes = dict(sent[name].attributes or {})
        assert attributes["mcp.method.name"] == name.split(" ")[0]
        assert attributes["mcp_supervisor.server"] == "cross"
    assert dict(sent[opening].attributes or {})["mcp.protocol.version"] == era
    (attempt,) = [span for span in traces.spans() if span.name == "mcp_supervisor connect cross"]
    assert sent[opening].parent is not None and sent[opening].parent.span_id == attempt.context.span_id
    assert traces.counter.open == 0
