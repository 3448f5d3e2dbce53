"""``/mcp`` over the real admin server (Hypercorn on a loopback port) fronting
mini_server.py: sessions, JSON and SSE answers, resumption, and the HTTP rules."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.gateway_http_support import McpHttp, parse_sse, request
from tests.test_admin_support import admin_running, config_of, mini_spec


async def test_a_session_lists_calls_streams_progress_and_ends_with_delete(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        mcp = McpHttp(api.http())
        with trio.fail_after(15):
            opened = await mcp.open()
            result = opened.json()["result"]
            assert result["protocolVersion"] == "2025-11-25"
            assert result["serverInfo"]["name"] == "mcp-supervisor"
            listed = await mcp.call(1, "tools/list")
            assert "mini_echo" in [tool["name"] for tool in listed["result"]["tools"]]
            echoed = await mcp.call(2, "tools/call", {"name": "mini_echo", "arguments": {"text": "hi"}})
            assert echoed["result"] == {"content": [{"type": "text", "text": "hi"}], "isError": False}

            params = {
                "name": "mini_progress",
                "arguments": {"steps": 2, "interval": 0.01},
                "_meta": {"progressToken": "p"},
            }
            streamed = await mcp.post(request(3, "tools/call", params))
            assert streamed.status == 200 and streamed.headers["content-type"].startswith("text/event-stream")
            events = parse_sse(streamed.body)
            assert events[0].data is None and events[0].retry is not None and events[0].id is not None
            # Progress first (the last step's may race the result upstream), the response last.
            assert events[1:-1] and {e.data["method"] for e in events[1:-1]} == {"notifications/progress"}
            assert {e.data["params"]["progressToken"] for e in events[1:-1]} == {"p"}
            assert events[-1].data["id"] == 3 and events[-1].data["result"]["isError"] is False
            ids = [e.id for e in events]
            assert len(set(ids)) == len(ids)

            deleted = await mcp.http.request("DELETE", "/mcp", headers=mcp.headers())
            assert deleted.status == 204
            gone = await mcp.post(request(4, "tools/list"))
            assert gone.status == 404
            assert "initialize" in gone.json()["error"]["message"]
