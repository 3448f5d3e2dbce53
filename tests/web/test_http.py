"""HTTP over plain ASGI (``supervisor/web/http.py``): headers, Accept and Content-Length
read as the admin API's framework reads them, and answers sent as it sends them."""

from __future__ import annotations

from typing import Any

import pytest
from werkzeug.datastructures import Headers as WerkzeugHeaders
from werkzeug.datastructures import MIMEAccept
from werkzeug.http import parse_accept_header
from werkzeug.sansio.utils import get_content_length

from supervisor.web.http import (
    Headers,
    accepts,
    content_length,
    empty_response,
    json_response,
    send_response,
    stream_response,
)

ACCEPTS = [
    None,
    "",
    "text/event-stream",
    "TEXT/EVENT-STREAM",
    "application/json, text/event-stream",
    "application/json;q=1, text/event-stream;q=0.5",
    "text/event-stream;q=0",
    "text/event-stream; q=0.000",
    "text/event-stream;q=1.5",
    "text/event-stream;q=x",
    "text/event-stream; charset=utf-8",
    "*/*",
    "text/*",
    " text/event-stream ",
    "application/json,,text/event-stream",
]


@pytest.mark.parametrize("accept", ACCEPTS)
def test_accept_is_read_as_werkzeug_reads_it(accept: str | None) -> None:
    raw = [] if accept is None else [(b"accept", accept.encode())]
    theirs = any(
        value.lower() == "text/event-stream" and quality > 0
        for value, quality in parse_accept_header(accept, MIMEAccept)
    )
    assert accepts(Headers(raw)) is theirs


@pytest.mark.parametrize(
    ("length", "coding"),
    [
        (None, None),
        ("12", None),
        ("0", None),
        ("-3", None),
        ("x", None),
        ("12", "chunked"),
        (None, "gzip, chunked"),
    ],
)
def test_content_length_is_read_as_werkzeug_reads_it(length: str | None, coding: str | None) -> None:
    raw = [(b"content-length", length.encode())] if length is not None else []
    raw += [(b"transfer-encoding", coding.encode())] if coding is not None else []
    assert content_length(Headers(raw)) == get_content_length(length, coding)


def test_headers_are_found_whatever_their_case_every_value_in_order() -> None:
    headers = Headers([(b"Origin", b"a"), (b"host", b"h"), (b"ORIGIN", b"b")])
    assert headers.getlist("origin") == ["a", "b"] == WerkzeugHeaders(headers.items()).getlist("Origin")
    assert headers.get("Host") == "h" and headers.get("x") is None


async def sent_by(response: Any, within_s: float | None = 5.0) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await send_response(send, response, within_s)
    return messages


async def test_a_json_answer_has_its_headers_then_type_and_length() -> None:
    response = json_response(
        {"a": "secret-value-1234"}, 201, {"Mcp-Session-Id": "s"}, scrub=lambda v: {"a": "***"}
    )
    start, body, last = await sent_by(response.with_headers({"Allow": "GET"}))
    assert start == {
        "type": "http.response.start",
        "status": 201,
        "headers": [
            (b"mcp-session-id", b"s"),
            (b"content-type", b"application/json"),
            (b"content-length", b"11"),
            (b"allow", b"GET"),
        ],
    }
    assert body == {"type": "http.response.body", "body": b'{"a":"***"}', "more_body": True}
    assert last == {"type": "http.response.body", "body": b"", "more_body": False}


async def test_an_empty_answer_and_a_stream() -> None:
    (start, *_) = await sent_by(empty_response(202))
    assert start["headers"] == [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", b"0")]

    async def events() -> Any:
        yield b"a"
        yield b"b"

    start, first, second, last = await sent_by(stream_response(events(), {"Cache-Control": "no-cache"}), None)
    assert start["headers"] == [(b"cache-control", b"no-cache"), (b"content-type", b"text/event-stream")]
    assert [first["body"], second["body"], last["more_body"]] == [b"a", b"b", False]
