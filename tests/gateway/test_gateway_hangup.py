"""A new-era client's hang-up on ``/mcp`` is a cancel: the task answering its request
ends, and the backend is told (``notifications/cancelled``), as a handshake-era
client's ``notifications/cancelled`` does (fastmcp#4124). Real admin server, real
mini_server.py recording every method it receives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from actors.protocol.messages import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from tests.support.admin import ALICE, TOKENS, admin_running, config_of, mini_spec
from tests.support.gateway_http import events_until

NEW_ERA = "2026-07-28"


def new_era_call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    meta = {META_PROTOCOL_VERSION: NEW_ERA, META_CLIENT_CAPABILITIES: {}}
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def headers_of(call: dict[str, Any], accept: str | None = None) -> dict[str, str]:
    """The era's headers: the version, and the method and tool the body names."""
    headers = {
        "MCP-Protocol-Version": NEW_ERA,
        "Mcp-Method": call["method"],
        "Mcp-Name": call["params"]["name"],
    }
    return headers if accept is None else {**headers, "Accept": accept}


def methods(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


async def until_logged(path: Path, method: str, count: int = 1, timeout_s: float = 5) -> None:
    """Until the backend recorded ``method`` ``count`` times (well before any call timeout)."""
    with trio.fail_after(timeout_s):
        while methods(path).count(method) < count:  # noqa: ASYNC110 - polls the backend's own log
            await trio.sleep(0.02)


@pytest.mark.parametrize("accept", ["application/json", "application/json, text/event-stream"])
async def test_a_new_era_clients_hang_up_cancels_its_call_at_the_backend(tmp_path: Path, accept: str) -> None:
    log = tmp_path / "methods.log"
    config = config_of(mini_spec("mini", "--methods-log", str(log)), tokens=TOKENS)
    async with admin_running(config, tmp_path) as api:
        http = api.http(ALICE)
        async with trio.open_nursery() as nursery:
            call = new_era_call(1, "mini_sleep", {"seconds": 30})
            headers = headers_of(call, accept)
            nursery.start_soon(lambda: http.request("POST", "/mcp", json=call, headers=headers))
            await until_logged(log, "tools/call")
            nursery.cancel_scope.cancel()  # the client hangs up: its connection closes
        await until_logged(log, "notifications/cancelled")  # well before the 30 s sleep ends
        # The gateway goes on: the next call is answered.
        echo = new_era_call(2, "mini_echo", {"text": "after the hang-up"})
        reply = await http.request("POST", "/mcp", json=echo, headers=headers_of(echo, accept))
        assert reply.status == 200
        body = reply.body.decode()
        assert "after the hang-up" in body, body


async def test_a_hang_up_while_the_answer_streams_cancels_the_call(tmp_path: Path) -> None:
    """Progress came first, so the answer is an SSE stream: closing it is the cancel."""
    log = tmp_path / "methods.log"
    config = config_of(mini_spec("mini", "--methods-log", str(log)), tokens=TOKENS)
    async with admin_running(config, tmp_path) as api:
        call = new_era_call(1, "mini_progress", {"steps": 300, "interval": 0.1})
        call["params"]["_meta"]["progressToken"] = "p1"
        headers = headers_of(call)
        with trio.fail_after(10):
            async with api.http(ALICE).stream("POST", "/mcp", json=call, headers=headers) as answer:
                assert answer.status == 200
                seen = await events_until(answer, lambda event: event.data is not None)
                assert seen[-1].data["method"] == "notifications/progress", seen
            # The stream is closed: the client hung up mid-answer.
            await until_logged(log, "notifications/cancelled")  # not after 30 s of progress
