"""The result envelope (a contract with hosts): shapes, text of content items, output bounds."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.router.envelope import (
    ERROR_CODES,
    TRUNCATION_MARKER,
    failure,
    join_text,
    success,
    truncate_utf8,
)

MARKER_BYTES = len(TRUNCATION_MARKER.encode("utf-8"))

PNG: dict[str, Any] = {"type": "image", "data": "iVBORw0KGgo=" * 50, "mimeType": "image/png"}
EMBEDDED: dict[str, Any] = {
    "type": "resource",
    "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "secret payload " * 50},
}
LINK_WITHOUT_MIME: dict[str, Any] = {"type": "resource_link", "uri": "file:///a.bin", "name": "a.bin"}


# ---------------------------------------------------------------- shapes


def test_success_shape_is_exactly_the_contract() -> None:
    content = [{"type": "text", "text": "12:00"}]
    envelope = success("time_get_current_time", content, {"time": "12:00"}, 3, 16_384)
    body = envelope.as_dict()
    assert list(body) == ["ok", "tool", "text", "content", "structured", "truncated", "duration_ms"]
    assert body == {
        "ok": True,
        "tool": "time_get_current_time",
        "text": "12:00",
        "content": [{"type": "text", "text": "12:00"}],
        "structured": {"time": "12:00"},
        "truncated": False,
        "duration_ms": 3,
    }
    assert json.loads(json.dumps(body)) == body  # plain JSON, no attrs objects or tuples left


def test_failure_shape_is_exactly_the_contract() -> None:
    envelope = failure("github_create_issue", "unavailable", "mcp server github is unavailable")
    assert envelope.as_dict() == {
        "ok": False,
        "tool": "github_create_issue",
        "error": {"code": "unavailable", "message": "mcp server github is unavailable"},
    }


DOCUMENTED_CODES = {
    "unknown_tool",
    "invalid_arguments",
    "denied",
    "unavailable",
    "timeout",
    "cancelled",
    "auth_failed",
    "server_error",
    "tool_error",
    "unknown_resource",
    "unknown_prompt",
    "unsupported",
    "busy",
    "rate_limited",
    "needs_auth",
}


def test_error_codes_are_the_documented_ones() -> None:
    assert ERROR_CODES == DOCUMENTED_CODES
    with pytest.raises(AssertionError):
        failure("x_y", "oops", "not a code")


# ---------------------------------------------------------------- text


def test_text_items_join_with_newlines() -> None:
    content = [{"type": "text", "text": "one"}, {"type": "text", "text": "two\nthree"}]
    assert join_text(content) == "one\ntwo\nthree"
    assert success("t_x", content, None, 0, 1000).text == "one\ntwo\nthree"


def test_non_text_items_are_named_with_their_mime_type() -> None:
    content = [
        {"type": "text", "text": "before"},
        PNG,
        EMBEDDED,
        LINK_WITHOUT_MIME,
        {"type": "audio", "data": "AAAA"},
        {"type": "text", "text": "after"},
    ]
    assert join_text(content).split("\n") == [
        "before",
        "[non-text content: image (image/png)]",
        "[non-text content: resource (text/plain)]",  # mimeType inside the embedded resource
        "[non-text content: resource_link]",
        "[non-text content: audio]",
        "after",
    ]
    envelope = success("t_x", content, None, 0, 100_000)
    assert envelope.text == join_text(content)
    assert list(envelope.content) == content  # under the bound the content is passed through


def test_empty_content() -> None:
    body = success("t_x", [], None, 0, 10).as_dict()
    assert body["text"] == "" and body["content"] == [] and body["truncated"] is False


# ---------------------------------------------------------------- truncation


def test_output_at_the_bound_is_not_cut() -> None:
    envelope = success("t_x", [{"type": "text", "text": "x" * 40}], {"n": 1}, 0, 40)
    assert envelope.text == "x" * 40
    assert envelope.truncated is False
    assert envelope.structured == {"n": 1}


def test_output_over_the_bound_is_cut_with_the_marker() -> None:
    envelope = success("t_x", [{"type": "text", "text": "x" * 41}], {"n": 1}, 7, 40)
    assert envelope.text == "x" * (40 - MARKER_BYTES) + "... [truncated]"
    assert len(envelope.text.encode()) == 40
    body = envelope.as_dict()
    assert body["truncated"] is True
    assert body["content"] == [{"type": "text", "text": envelope.text}]
    assert body["structured"] is None  # would carry the oversized payload again
    assert body["duration_ms"] == 7


def test_truncated_content_loses_payload_data() -> None:
    content = [{"type": "text", "text": "y" * 500}, PNG, EMBEDDED, LINK_WITHOUT_MIME]
    envelope = success("t_x", content, None, 0, 100)
    assert envelope.truncated
    assert len(envelope.text.encode()) <= 100
    assert envelope.text.endswith(TRUNCATION_MARKER)
    items = envelope.as_dict()["content"]
    assert items == [
        {"type": "text", "text": envelope.text},
        {"type": "image", "mimeType": "image/png"},
        {"type": "resource"},
        {"type": "resource_link", "uri": "file:///a.bin", "name": "a.bin"},
    ]
    dumped = json.dumps(items)
    assert PNG["data"] not in dumped and "secret payload" not in dumped


def test_cut_never_splits_a_multibyte_character() -> None:
    text = "é" * 30  # 2 bytes each
    cut, truncated = truncate_utf8(text, MARKER_BYTES + 5)  # room for 2.5 characters
    assert truncated
    assert cut == "éé" + TRUNCATION_MARKER


@pytest.mark.parametrize(
    ("bound", "expected"),
    [
        (-1, ""),
        (0, ""),
        (1, "."),
        (5, "... ["),
        (15, TRUNCATION_MARKER),
        (16, "h" + TRUNCATION_MARKER),
        (17, "h" + TRUNCATION_MARKER),  # 'é' is two bytes: it does not fit in the one left
        (18, "hé" + TRUNCATION_MARKER),
    ],
)
def test_tiny_bounds(bound: int, expected: str) -> None:
    text = "héllo wörld, much longer than any of the bounds"
    assert truncate_utf8(text, bound) == (expected, True)
    assert len(expected.encode()) <= max(bound, 0)


def test_tiny_bounds_with_short_input_keep_it() -> None:
    assert truncate_utf8("", 0) == ("", False)
    assert truncate_utf8("a", 1) == ("a", False)
    assert truncate_utf8("é", 1) == (".", True)


@given(st.text(), st.integers(min_value=0, max_value=300))
def test_truncate_utf8_properties(text: str, bound: int) -> None:
    cut, truncated = truncate_utf8(text, bound)
    encoded = cut.encode("utf-8")
    assert len(encoded) <= bound
    assert encoded.decode("utf-8") == cut  # whole characters only
    if len(text.encode("utf-8")) <= bound:
        assert (cut, truncated) == (text, False)
        return
    assert truncated
    if bound < MARKER_BYTES:
        assert cut == TRUNCATION_MARKER[:bound]
        return
    assert cut.endswith(TRUNCATION_MARKER)
    head = cut[: -len(TRUNCATION_MARKER)]
    assert text.startswith(head)
    # The longest prefix that fits: one more character would not.
    room = bound - MARKER_BYTES
    assert len(head.encode()) + len(text[len(head)].encode()) > room


@given(
    st.lists(
        st.one_of(
            st.builds(lambda t: {"type": "text", "text": t}, st.text()),
            st.just(PNG),
            st.just(EMBEDDED),
        ),
        max_size=6,
    ),
    st.integers(min_value=0, max_value=400),
)
def test_success_text_always_fits_the_bound(content: list[dict[str, Any]], bound: int) -> None:
    envelope = success("t_x", content, {"k": "v"}, 0, bound)
    assert len(envelope.text.encode()) <= bound
    full = join_text(content)
    assert envelope.truncated == (len(full.encode()) > bound)
    if not envelope.truncated:
        assert envelope.text == full and envelope.structured == {"k": "v"}
