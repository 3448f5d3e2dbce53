"""A request the client cancels on ``/mcp`` gets no response (the spec: a receiver
should not answer a cancelled request), while its call is cancelled at the backend.
Real admin server, mini_server.py's ``sleep`` behind it.

What the POST answers then: a stream already begun ends without the response (a
resumption of it is refused, 410, so a client stops trying); a request answered
before anything was sent gets an SSE stream with no event (nothing to resume), or 202
when the client takes JSON only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.gateway import http_front
from tests.support.admin import admin_running, config_of, mini_spec, until
from tests.support.gateway_http import McpHttp, events_until, parse_sse, request, rest_raw

SLOW = {"name": "mini_sleep", "arguments": {"seconds": 30}}


def _lines(path: Path, word: str) -> int:
    return path.read_text().count(word) if path.exists() else 0


async def _cancel(mcp: McpHttp, request_id: Any) -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
    assert (await mcp.post(note)).status == 202


async def test_a_cancelled_calls_stream_ends_without_its_response_and_is_not_resumed(tmp_path: Path) -> None:
    methods = tmp_path / "methods.log"
    async with admin_running(config_of(mini_spec("mini", "--methods-log", str(methods))), tmp_path) as api:
        mcp = McpHttp(api.http())
        with trio.fail_after(15):
            await mcp.open()
            async with mcp.http.stream(
                "POST", "/mcp", json=request("slow", "tools/call", SLOW), headers=mcp.headers()
            ) as stream:
                (primed,) = await events_until(stream, lambda event: event.id is not None)
                await until(lambda: _lines(methods, "tools/call") == 1)  # the backend has the call
                await _cancel(mcp, "slow")
                rest = parse_sse(await rest_raw(stream))  # the stream ends
            assert [event.data for event in rest if event.data is not None] == []
            await until(lambda: _lines(methods, "notifications/cancelled") == 1)  # the backend was told

            resume = mcp.headers({"Last-Event-ID": str(primed.id)}, accept="text/event-stream")
            resumed = await mcp.http.request("GET", "/mcp", headers=resume)
            assert resumed.status == 410 and "cancelled" in resumed.json()["error"]["message"]
            again = await mcp.call(2, "tools/call", {"name": "mini_echo", "arguments": {"text": "on"}})
            assert again["result"]["content"] == [{"type": "text", "text": "on"}]  # the session lives on


@pytest.mark.parametrize(
    ("accept", "status"), [("application/json, text/event-stream", 200), ("application/json", 202)]
)
async def test_a_request_cancelled_before_anything_was_sent_gets_no_response(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, accept: str, status: int
) -> None:
    monkeypatch.setattr(http_front, "JSON_WINDOW_S", 60.0)  # the call's POST has sent nothing yet
    calls = tmp_path / "calls.log"
    async with admin_running(config_of(mini_spec("mini", "--calls-log", str(calls))), tmp_path) as api:
        mcp = McpHttp(api.http())
        with trio.fail_after(15):
            await mcp.open()
            replies: list[Any] = []

            async def post() -> None:
                replies.append(await mcp.post(request(7, "tools/call", SLOW), accept=accept))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(post)
                await until(lambda: _lines(calls, '"sleep"') == 1)
                await _cancel(mcp, 7)
        (reply,) = replies
        assert reply.status == status and reply.body == b"", reply
        if status == 200:  # an SSE stream without a single event
            assert reply.headers["content-type"].startswith("text/event-stream")
