"""``/mcp`` for 2026-07-28 clients, the HTTP rules of that era: a request repeats its
method in ``Mcp-Method`` and what it names in ``Mcp-Name`` (SEP-2243); one that leaves
a header out is refused with 400 and -32020, saying which."""

from __future__ import annotations

from pathlib import Path

import trio

from supervisor.gateway.http_rules import HEADER_MISMATCH
from tests.gateway.test_gateway_stateless import VERSION, request
from tests.support.admin import admin_running, config_of, mini_spec

BASE = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION}


async def test_a_new_era_request_without_its_method_or_name_header_is_refused(tmp_path: Path) -> None:
    call = request(2, "tools/call", {"name": "mini_echo", "arguments": {"text": "x"}})
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        with trio.fail_after(15):
            listing = request(1, "tools/list")
            nameless = await http.request("POST", "/mcp", json=listing, headers=BASE)
            assert nameless.status == 400, nameless
            assert nameless.json()["error"]["code"] == HEADER_MISMATCH and nameless.json()["id"] == 1
            assert "Mcp-Method header is missing" in nameless.json()["error"]["message"]

            unnamed = await http.request(
                "POST", "/mcp", json=call, headers={**BASE, "Mcp-Method": "tools/call"}
            )
            assert unnamed.status == 400 and unnamed.json()["error"]["code"] == HEADER_MISMATCH
            assert "Mcp-Name header is missing" in unnamed.json()["error"]["message"]

            both = {**BASE, "Mcp-Method": "tools/call", "Mcp-Name": "mini_echo"}
            answered = await http.request("POST", "/mcp", json=call, headers=both)
            assert answered.status == 200, answered
            assert answered.json()["result"]["content"][0]["text"] == "x", answered
            listed = await http.request(
                "POST", "/mcp", json=listing, headers={**BASE, "Mcp-Method": "tools/list"}
            )
            assert listed.status == 200 and listed.json()["result"]["tools"], listed
