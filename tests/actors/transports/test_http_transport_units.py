"""The remote transports' pure parts: status decisions, endpoint rules, the HTTP
framings, and how the config loader reads ``transport`` (the SSE parser's tests are
in test_sse.py)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from actors.protocol.errors import FramingError, ProtocolError, Unencodable
from actors.protocol.http_framing import decode_body, decode_event, encode_body, is_answer, what
from actors.protocol.messages import ErrorObject, ErrorResponse, Notification, Request, Response
from actors.protocol.sse import ServerSentEvent, SSEParser
from actors.redaction import Redactor, safe_url
from actors.spec import ServerSpec
from actors.transport_errors import TransportClosed, TransportError
from actors.transports.http_link import (
    Inbox,
    RemoteLink,
    error_answer,
)
from actors.transports.http_status import (
    GetNext,
    Next,
    decide_get,
    decide_post,
    header_safe,
    reconnect_delay,
    reopen_at_once,
)
from actors.transports.legacy_sse import resolve_endpoint
from actors.transports.remote import open_remote_transport
from supervisor.settings.loader import ConfigError, load_config

# ------------------------------------------------------------------ decisions


@pytest.mark.parametrize(
    ("status", "initialize", "has_session", "may_fall_back", "step"),
    [
        (200, False, True, False, Next.READ_BODY),
        (202, False, True, False, Next.ACCEPTED),
        (204, False, True, False, Next.ACCEPTED),
        (401, True, False, True, Next.AUTH_FAILED),
        (403, False, True, False, Next.AUTH_FAILED),
        (404, True, False, True, Next.FALL_BACK),
        (405, True, False, True, Next.FALL_BACK),
        (400, True, False, True, Next.FALL_BACK),
        (405, True, False, False, Next.REFUSED),
        (404, False, True, True, Next.SESSION_EXPIRED),  # fallback only ever on initialize
        (404, False, False, False, Next.REFUSED),
        (307, False, True, False, Next.REDIRECTED),
        (500, True, False, True, Next.SERVER_ERROR),
        (503, False, True, False, Next.SERVER_ERROR),
        (422, False, True, False, Next.REFUSED),
    ],
)
def test_decide_post(
    status: int, initialize: bool, has_session: bool, may_fall_back: bool, step: Next
) -> None:
    assert (
        decide_post(status, initialize=initialize, has_session=has_session, may_fall_back=may_fall_back)
        is step
    )


@pytest.mark.parametrize(
    ("status", "reopening", "step"),
    [
        (200, False, GetNext.LISTEN),
        (405, True, GetNext.NO_STREAM),
        (404, False, GetNext.NO_STREAM),  # the first GET is optional: anything odd means "none"
        (500, False, GetNext.NO_STREAM),
        (401, False, GetNext.AUTH_FAILED),
        (404, True, GetNext.SESSION_EXPIRED),
        (502, True, GetNext.RETRY),
        (400, True, GetNext.LOST),
    ],
)
def test_decide_get(status: int, reopening: bool, step: GetNext) -> None:
    assert decide_get(status, reopening=reopening, has_session=True) is step


def test_only_a_stream_that_broke_off_is_reopened_at_once_and_not_twice_in_a_row() -> None:
    assert reopen_at_once(GetNext.DROPPED, after_at_once=False)
    assert not reopen_at_once(GetNext.DROPPED, after_at_once=True)
    for step in (GetNext.LISTEN, GetNext.RETRY):  # ended by the server, or a failed GET: wait
        assert not reopen_at_once(step, after_at_once=False)


def test_reconnect_delay_honours_retry_within_bounds() -> None:
    assert reconnect_delay(None) == 1.0
    assert reconnect_delay(2000) == 2.0
    assert reconnect_delay(0) == 0.05
    assert reconnect_delay(10**9) == 600.0


def test_endpoint_must_stay_on_the_origin() -> None:
    base = "http://127.0.0.1:8000/sse"
    assert resolve_endpoint(base, "/messages?session_id=1") == "http://127.0.0.1:8000/messages?session_id=1"
    assert resolve_endpoint(base, "http://127.0.0.1:8000/m") == "http://127.0.0.1:8000/m"
    assert resolve_endpoint("https://h/mcp", "https://h:443/m") == "https://h:443/m"
    for elsewhere in ("http://evil.example/m", "https://127.0.0.1:8000/m", "//127.0.0.1:9/m"):
        with pytest.raises(ValueError, match="not on the server's origin"):
            resolve_endpoint(base, elsewhere)


def test_safe_url_and_header_values() -> None:
    assert safe_url("https://user:pw@h.example:8443/mcp?token=abc#x") == "https://h.example:8443/mcp"
    assert safe_url("http://[::1]:9/mcp") == "http://[::1]:9/mcp"
    assert header_safe("2025-06-18") and header_safe("abc-DEF_123")
    assert not header_safe("") and not header_safe("a b") and not header_safe("x\r\nInjected: 1")
    assert header_safe("event 7", spaces=True) and not header_safe("é", spaces=True)


def test_outgoing_messages_and_answers() -> None:
    call = Request(3, "tools/call", {"name": "x"})
    assert what(call) == "tools/call" and what(Notification("notifications/initialized")) == (
        "notifications/initialized"
    )
    assert what(Response("srv", {})) == "a response"
    assert is_answer(Response(3, {}), call) and is_answer(
        ErrorResponse("a", ErrorObject(1, "no")), Request("a", "m")
    )
    assert not is_answer(Response("3", {}), call)  # 3 and "3" are different requests
    assert not is_answer(Request(3, "x"), call) and not is_answer(
        ErrorResponse(None, ErrorObject(1, "?")), call
    )
    assert error_answer(3, "no") == ErrorResponse(3, ErrorObject(-32603, "no"))


def test_http_framings_decode_once_into_messages() -> None:
    assert json.loads(encode_body(Request(1, "ping"))) == {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert b"\n" not in encode_body(Request(1, "tools/call", {"text": "a\nb"}))
    with pytest.raises(Unencodable):
        encode_body(Request(1, "tools/call", {"n": 2**70}))
    assert decode_body(b'{"jsonrpc":"2.0","id":1,"result":{}}') == [Response(1, {})]
    assert decode_body(b'[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"n"}]') == [
        Response(1, {}),
        Notification("n"),
    ]
    with pytest.raises(FramingError, match="body is not JSON"):
        decode_body(b"<html>oops</html>")
    with pytest.raises(ProtocolError, match="jsonrpc"):
        decode_body(b'{"id": 1, "result": {}}')
    message = ServerSentEvent('{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}')
    assert decode_event(message) == [Notification("notifications/tools/list_changed")]
    assert decode_event(ServerSentEvent("", id="prime-1")) == []  # a priming event
    assert decode_event(ServerSentEvent("/messages?s=1", event="endpoint")) == []
    with pytest.raises(FramingError, match="event is not JSON"):
        decode_event(ServerSentEvent("not json"))


async def test_inbox_hands_out_buffered_messages_before_the_failure() -> None:
    inbox = Inbox()
    await inbox.put([Notification("one")])
    await inbox.put([Notification("two"), Notification("three")])
    inbox.fail(TransportClosed("gone"))
    inbox.fail(TransportClosed("second failures are ignored"))
    await inbox.put([Notification("dropped")])
    with trio.fail_after(1):
        # What was queued is handed out together, as one read of a pipe would.
        assert await inbox.get() == [Notification("one"), Notification("two"), Notification("three")]
        with pytest.raises(TransportClosed, match="gone"):
            await inbox.get()


# ------------------------------------------------------------------ config


def load(tmp_path: Path, entry: dict[str, object]) -> str:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"mcpServers": {"s": entry}}))
    return load_config(path).servers[0].transport


@pytest.mark.parametrize(
    ("entry", "transport"),
    [
        ({"url": "https://h/mcp"}, "auto"),
        ({"type": "remote", "url": "https://h/mcp"}, "auto"),
        ({"type": "http", "url": "https://h/mcp"}, "auto"),
        ({"type": "sse", "url": "https://h/sse"}, "sse"),
        ({"type": "remote", "transport": "sse", "url": "https://h/sse"}, "sse"),
        ({"transport": "streamable-http", "url": "https://h/mcp"}, "streamable-http"),
        ({"type": "streamableHttp", "url": "https://h/mcp"}, "streamable-http"),
        ({"type": "remote", "transport": "auto", "url": "https://h/mcp"}, "auto"),
    ],
)
def test_loader_reads_the_remote_transport(tmp_path: Path, entry: dict[str, object], transport: str) -> None:
    assert load(tmp_path, entry) == transport


def test_loader_refuses_contradicting_transports(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'transport' says sse but 'type' says streamable-http"):
        load(tmp_path, {"type": "streamable-http", "transport": "sse", "url": "https://h/mcp"})
    with pytest.raises(ConfigError, match="also accepted: stdio"):
        load(tmp_path, {"type": "auto", "url": "https://h/mcp"})  # auto is a transport, not a type


@pytest.mark.parametrize(
    ("url", "transport", "problem"),
    [
        ("ftp://h/x", "auto", "needs an http:// or https:// url"),
        ("http://[::1", "auto", "needs an http:// or https:// url"),
        (None, "auto", "needs an http:// or https:// url"),
        ("http://h/mcp", "ws", "unknown transport 'ws'; use auto, streamable-http, sse"),
    ],
)
async def test_connector_refuses_unusable_specs(url: str | None, transport: str, problem: str) -> None:
    spec = ServerSpec(name="r", type="remote", url=url, transport=transport)
    with pytest.raises(TransportError, match=re.escape(problem)):
        async with open_remote_transport(spec):
            pass  # pragma: no cover


# ------------------------------------------------------------------ SSE pump


class _Body:
    """A response whose SSE body yields ``chunks``, then ends or stays open."""

    def __init__(self, chunks: list[bytes], *, stays_open: bool = False) -> None:
        self.chunks, self.stays_open, self.ended = chunks, stays_open, False

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        return self._body()

    async def _body(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.stays_open:
            await trio.sleep_forever()
        self.ended = True


async def test_pump_reads_on_after_the_answer_until_the_stream_ends_within_the_drain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    spec = ServerSpec(name="r", type="remote", url="http://127.0.0.1:1/mcp")
    link = RemoteLink(spec, None, None, Inbox(), Redactor(()))  # type: ignore[arg-type]
    seen: list[str] = []

    async def handle(event: ServerSentEvent) -> bool:
        seen.append(event.data)
        return event.data == "answer"

    body = _Body([b"data: answer\n\ndata: after\n\n", b"data: later\n\n"])
    assert await link.pump(body, SSEParser(), handle, "tools/call", drain_s=0.25)  # type: ignore[arg-type]
    assert seen == ["answer", "after", "later"] and body.ended  # read to its end: reusable

    seen.clear()
    body = _Body([b"data: answer\n\n"], stays_open=True)
    start = trio.current_time()
    assert await link.pump(body, SSEParser(), handle, "tools/call", drain_s=0.25)  # type: ignore[arg-type]
    assert trio.current_time() - start == pytest.approx(0.25)  # given up after the drain
    assert seen == ["answer"]

    seen.clear()
    body = _Body([b"data: answer\n\ndata: after\n\n"])
    assert await link.pump(body, SSEParser(), handle, "the GET stream")  # type: ignore[arg-type]
    assert seen == ["answer"] and not body.ended  # no drain: it returns at the answer
