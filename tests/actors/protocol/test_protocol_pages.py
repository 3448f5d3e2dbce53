"""Listing pages of every kind (tools, resources, templates, prompts), read without I/O:
a malformed entry is dropped with a problem, a malformed page is a ProtocolError."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.protocol.errors import ProtocolError
from actors.protocol.messages import Prompt, Resource, ResourceTemplate, Tool
from actors.protocol.pages import (
    parse_prompts_page,
    parse_resources_page,
    parse_templates_page,
    parse_tools_page,
)


def test_parse_tools_page() -> None:
    page = parse_tools_page(
        {
            "tools": [
                {
                    "name": "echo",
                    "title": "Echo",
                    "description": "says it back",
                    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
                    "outputSchema": {"type": "object"},
                    "annotations": {"readOnlyHint": True},
                    "somethingNew": 1,
                },
                {"name": "bare"},
                {"name": "null-description", "description": None},
            ],
            "nextCursor": "page-2",
        }
    )
    assert page.tools == (
        Tool(
            name="echo",
            description="says it back",
            input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
            title="Echo",
            annotations={"readOnlyHint": True},
            output_schema={"type": "object"},
        ),
        Tool(name="bare", description="", input_schema={"type": "object"}),
        Tool(name="null-description", description=""),
    )
    assert page.next_cursor == "page-2"
    assert page.problems == ()


def test_last_tools_page_has_no_cursor() -> None:
    assert parse_tools_page({"tools": []}).next_cursor is None
    assert parse_tools_page({"tools": [], "nextCursor": None}).next_cursor is None


def test_malformed_tools_are_dropped_and_reported_while_good_ones_stay() -> None:
    page = parse_tools_page(
        {
            "tools": [
                {"name": "good-1"},
                42,
                {"description": "no name"},
                {"name": ""},
                {"name": "bad-schema", "inputSchema": "object"},
                {"name": "bad-annotations", "annotations": ["readOnly"]},
                {"name": "good-2", "inputSchema": {"type": "object"}},
            ]
        }
    )
    assert [tool.name for tool in page.tools] == ["good-1", "good-2"]
    assert len(page.problems) == 5
    assert "must be an object, got int" in page.problems[0]
    assert "no name" in page.problems[1]
    assert "no name" in page.problems[2]
    assert "'bad-schema'" in page.problems[3]
    assert "'bad-annotations'" in page.problems[4]


@pytest.mark.parametrize("result", [{}, {"tools": None}, {"tools": {"echo": {}}}, {"tools": "echo"}])
def test_tools_page_without_a_tools_list_is_a_protocol_error(result: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError, match="no tools array"):
        parse_tools_page(result)


def test_non_string_cursor_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="nextCursor"):
        parse_tools_page({"tools": [], "nextCursor": 2})


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["name", "description", "inputSchema", "title"]) | st.text(), inner)
    ),
    max_leaves=10,
)


@given(entries=st.lists(_json, max_size=6))
def test_every_tools_entry_is_either_a_tool_or_a_problem(entries: list[Any]) -> None:
    page = parse_tools_page({"tools": entries})
    assert len(page.tools) + len(page.problems) == len(entries)


def test_parse_resources_page_keeps_each_item_as_sent() -> None:
    item = {"uri": "file:///a.txt", "name": "a", "mimeType": "text/plain", "annotations": {"x": 1}}
    page = parse_resources_page({"resources": [item, {"uri": "mem://b"}], "nextCursor": "2"})
    assert page.items == (
        Resource("file:///a.txt", "a", item),
        Resource("mem://b", "mem://b", {"uri": "mem://b"}),
    )
    assert page.items[0].raw == item
    assert page.next_cursor == "2"
    assert page.problems == ()


def test_parse_templates_page() -> None:
    item = {"uriTemplate": "test://static/resource/{id}", "name": "Static", "description": "d"}
    page = parse_templates_page({"resourceTemplates": [item]})
    assert page.items == (ResourceTemplate("test://static/resource/{id}", "Static", item),)
    assert page.next_cursor is None


def test_parse_prompts_page_names_arguments_and_the_required_ones() -> None:
    item = {
        "name": "complex",
        "arguments": [{"name": "temperature", "required": True}, {"name": "style"}],
    }
    page = parse_prompts_page({"prompts": [item, {"name": "bare"}]})
    assert page.items == (
        Prompt("complex", ("temperature", "style"), ("temperature",), item),
        Prompt("bare", (), (), {"name": "bare"}),
    )


@pytest.mark.parametrize(
    ("parse", "key", "good", "bad", "problem"),
    [
        (parse_resources_page, "resources", {"uri": "a://b", "name": "b"}, {"name": "no uri"}, "no uri"),
        (parse_resources_page, "resources", {"uri": "a://b"}, {"uri": "a://c", "name": 3}, "name must be"),
        (
            parse_templates_page,
            "resourceTemplates",
            {"uriTemplate": "a://{x}"},
            {"uri": "a://x"},
            "no uriTemplate",
        ),
        (
            parse_prompts_page,
            "prompts",
            {"name": "p"},
            {"name": "q", "arguments": {"a": 1}},
            "arguments must be",
        ),
        (
            parse_prompts_page,
            "prompts",
            {"name": "p"},
            {"name": "q", "arguments": [{"required": True}]},
            "needs a name",
        ),
        (parse_prompts_page, "prompts", {"name": "p"}, "prompt", "must be an object, got str"),
    ],
)
def test_a_malformed_entry_is_dropped_with_a_problem(
    parse: Any, key: str, good: dict[str, Any], bad: Any, problem: str
) -> None:
    page = parse({key: [good, bad, good]})
    assert len(page.items) == 2
    [reported] = page.problems
    assert problem in reported


@pytest.mark.parametrize(
    ("parse", "key", "method"),
    [
        (parse_resources_page, "resources", "resources/list"),
        (parse_templates_page, "resourceTemplates", "resources/templates/list"),
        (parse_prompts_page, "prompts", "prompts/list"),
    ],
)
def test_a_malformed_page_is_a_protocol_error(parse: Any, key: str, method: str) -> None:
    with pytest.raises(ProtocolError, match=f"{method} result has no {key} array"):
        parse({key: {"a": 1}})
    with pytest.raises(ProtocolError, match=f"{method} nextCursor must be a string"):
        parse({key: [], "nextCursor": 3})
