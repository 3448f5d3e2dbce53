"""Tool parameters mirrored into ``Mcp-Param-*`` headers (SEP-2243): the pure rules as
tables, the listing that leaves out a tool with a bad annotation, and a real SDK 2.3
Streamable HTTP server (per-request era) that refuses a call whose headers are missing."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated, Any

import pytest
import trio
from pydantic import Field  # the SDK's own dependency

from actors.connection.listing import read_tools
from actors.protocol.era import Era
from actors.protocol.param_headers import (
    annotation_problem,
    designations,
    listing_designations,
    param_headers,
)
from actors.protocol.session import ResponseReceived
from supervisor import Supervisor
from supervisor.cli.conformance_client import context_calls
from supervisor.settings.model import Config
from tests.end_to_end.test_http_transport_peers import START_S, hypercorn_app, remote


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def prop(kind: str, header: Any = None) -> dict[str, Any]:
    return {"type": kind} if header is None else {"type": kind, "x-mcp-header": header}


# The conformance suite's invalid tools (http-invalid-tool-headers), and a few more.
OFF_CHAIN = "reached through 'properties'"
INVALID = [
    ("empty", schema(value=prop("string", "")), "not a valid header name"),
    ("object", schema(data=prop("object", "Data")), "not object"),
    ("array", schema(items={"type": "array", "items": prop("string"), "x-mcp-header": "Items"}), "not array"),
    ("null", schema(nil=prop("null", "Nil")), "not null"),
    ("number", schema(score=prop("number", "Score")), "not number"),
    ("no type", schema(v={"x-mcp-header": "V"}), "not None"),
    ("same case", schema(f1=prop("string", "Region"), f2=prop("string", "Region")), "repeats"),
    ("other case", schema(f1=prop("string", "MyField"), f2=prop("string", "myfield")), "repeats"),
    ("space", schema(value=prop("string", "My Region")), "not a valid header name"),
    ("colon", schema(value=prop("string", "Region:Primary")), "not a valid header name"),
    ("non-ascii", schema(value=prop("string", "Région")), "not a valid header name"),
    ("control", schema(value=prop("string", "Region\t1")), "not a valid header name"),
    ("not a string", schema(value=prop("string", 7)), "must be a string, not int"),
    ("in items", schema(xs={"type": "array", "items": prop("string", "X")}), OFF_CHAIN),
    ("in allOf", {"type": "object", "allOf": [schema(a=prop("string", "A"))]}, OFF_CHAIN),
    ("at the root", {"type": "object", "x-mcp-header": "Root"}, OFF_CHAIN),
]


@pytest.mark.parametrize(("case", "input_schema", "says"), INVALID, ids=[c[0] for c in INVALID])
def test_an_invalid_annotation_is_named_with_its_property(case: str, input_schema: Any, says: str) -> None:
    problem = annotation_problem(input_schema)
    assert problem is not None and says in problem, problem


VALID = [
    ("none", schema(q=prop("string")), {}),
    ("primitives", schema(r=prop("string", "Region"), p=prop("integer", "P"), v=prop("boolean", "V")),
     {("r",): "Region", ("p",): "P", ("v",): "V"}),
    ("nested", schema(o={"type": "object", "properties": {"id": prop("string", "Id")}}), {("o", "id"): "Id"}),
    ("token chars", schema(a=prop("string", "A.b_c-d~1")), {("a",): "A.b_c-d~1"}),
    ("in $defs only as data", {"type": "object", "default": {"x-mcp-header": 1}}, {}),
    ("not a schema", None, {}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "input_schema", "found"), VALID, ids=[c[0] for c in VALID])
def test_valid_annotations_designate_their_property_paths(case: str, input_schema: Any, found: Any) -> None:
    assert annotation_problem(input_schema) is None
    assert designations(input_schema) == found


# The values of the suite's http-custom-headers scenario, as the suite decodes them.
VALUES = [
    ("us-west1", "us-west1"),
    (42, "42"),
    (False, "false"),
    (True, "true"),
    ("", ""),
    ("us west 1", "us west 1"),
    ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
    (" padded ", "=?base64?IHBhZGRlZCA=?="),
    (" us-west1", "=?base64?IHVzLXdlc3Qx?="),
    ("us-west1 ", "=?base64?dXMtd2VzdDEg?="),
    ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
    ("line1\r\nline2", "=?base64?bGluZTENCmxpbmUy?="),
    ("\tindented", "=?base64?CWluZGVudGVk?="),
    ("=?base64?eA==?=", "=?base64?PT9iYXNlNjQ/ZUE9PT89?="),  # would read as the sentinel
]


@pytest.mark.parametrize(("value", "header"), VALUES)
def test_a_value_is_sent_as_its_text_or_base64_when_a_header_cannot_carry_it(value: Any, header: str) -> None:
    assert param_headers({("v",): "V"}, {"v": value}) == {"Mcp-Param-V": header}


def test_missing_null_and_unmirrorable_values_send_no_header() -> None:
    designated = {("a",): "A", ("b",): "B", ("c",): "C", ("o", "id"): "Id", ("x", "y"): "Y"}
    arguments = {"a": None, "c": {"nested": 1}, "o": {"id": "7"}, "x": "not an object", "q": "unmarked"}
    assert param_headers(designated, arguments) == {"Mcp-Param-Id": "7"}
    assert param_headers(designated, None) == {}


def test_a_listing_page_gives_designations_and_none_for_an_invalid_tool() -> None:
    page = {
        "tools": [
            {"name": "good", "inputSchema": schema(r=prop("string", "Region"))},
            {"name": "bad", "inputSchema": schema(n=prop("number", "N"))},
            {"name": "plain"},
            "not a tool",
        ]
    }
    assert listing_designations(page) == {"good": {("r",): "Region"}, "bad": None, "plain": {}}


TOOLS = {
    "tools": [
        {"name": "valid_tool", "inputSchema": schema(region=prop("string", "Region"))},
        {"name": "invalid_number_header", "inputSchema": schema(score=prop("number", "Score"))},
    ]
}


async def answer_tools(method: str, params: dict[str, Any] | None) -> ResponseReceived:
    return ResponseReceived(1, method, TOOLS)


async def test_the_per_request_era_leaves_out_a_tool_with_an_invalid_annotation() -> None:
    tools, problems = await read_tools(answer_tools, "far", Era.PER_REQUEST)
    assert [t.name for t in tools] == ["valid_tool"]
    assert problems == [
        "tool 'invalid_number_header' left out: property 'score': x-mcp-header belongs on a string, "
        "integer or boolean, not number"
    ]


async def test_the_handshake_era_does_not_read_the_annotation() -> None:
    tools, problems = await read_tools(answer_tools, "far", Era.HANDSHAKE)
    assert [t.name for t in tools] == ["valid_tool", "invalid_number_header"] and problems == []


def routing_server() -> Any:
    """An official SDK 2.3 server whose tool mirrors ``region`` into ``Mcp-Param-Region``
    and checks it (it refuses a call whose header is missing or differs)."""
    if importlib.util.find_spec("mcp") is None:
        pytest.skip("the mcp package is not installed (pip install -e '.[dev]' brings it)")
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("routing")

    @server.tool()
    def route(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
        hops: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Hops"})],
        text: str,
    ) -> str:
        """Say where the call was routed."""
        return f"{text} via {region} in {hops}"

    return server


async def test_a_call_to_a_real_per_request_server_carries_its_parameter_headers(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []  # the headers of each POST
    app = routing_server().streamable_http_app(json_response=True)

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await app(scope, receive, send)

    async with hypercorn_app(recording) as base:
        spec = remote("sdk", f"{base}/mcp", transport="streamable-http")
        async with Supervisor.open(Config(servers=(spec,)), state_dir=tmp_path) as sup, sup.session() as s:
            with trio.fail_after(START_S):
                turn = await s.begin_turn()
                routed = await turn.call("sdk_route", {"region": " eu-west 1", "hops": 3, "text": "hi"})
    assert routed.ok and routed.text == "hi via  eu-west 1 in 3", routed
    # The per-request era: every POST names its method (an initialize would not).
    assert all(h.get("mcp-protocol-version") == "2026-07-28" and "mcp-method" in h for h in seen), seen
    (call,) = [h for h in seen if h.get("mcp-method") == "tools/call"]
    assert call["mcp-param-region"] == "=?base64?IGV1LXdlc3QgMQ==?=" and call["mcp-param-hops"] == "3"


def test_the_conformance_client_makes_the_calls_a_scenario_context_names() -> None:
    """http-custom-headers names its calls; a null argument means "not given"."""
    context = {
        "toolCalls": [
            {"name": "test_custom_headers", "arguments": {"region": "us-west1", "debug": True}},
            {"name": "test_custom_headers_null", "arguments": {"region": "us-east1", "verbose": None}},
            {"name": "no_arguments"},
            {"arguments": {"nameless": 1}},
            "not a call",
        ]
    }
    assert context_calls(context) == [
        ("test_custom_headers", {"region": "us-west1", "debug": True}),
        ("test_custom_headers_null", {"region": "us-east1"}),
        ("no_arguments", {}),
    ]
    assert context_calls({"name": "tools_call"}) is None
