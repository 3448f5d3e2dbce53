"""The official SDK's Streamable HTTP client in its DEFAULT mode (``mode="auto"``:
``server/discover`` first, the 2026-07-28 era when the server speaks it) against
``/mcp`` of the real admin server: list, call, progress, and an elicitation answered
through the input-required round trip of the per-request era."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx2
import trio
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitRequestParams, ElicitResult

from actors.spec import ServerSpec, Start
from tests.support.admin import ALICE, TOKENS, admin_running, config_of
from tests.support.paths import SERVERS

SDK_SERVER = str(SERVERS / "sdk_server.py")


def auto_client(url: str, token: str, **callbacks: Any) -> Client:
    """The SDK's client as a host would make it: no ``mode``, so the default."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=10)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), **callbacks)


def sdk_spec(name: str = "sdk") -> ServerSpec:
    return ServerSpec(
        name=name,
        command=(sys.executable, SDK_SERVER),
        start=Start.EAGER,
        trusted=True,
        protocol="2025-11-25",
        shutdown_grace_s=0.5,
    )


async def test_the_sdk_client_in_its_default_mode_speaks_the_new_era_through_the_gateway(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"answer": "blue"})

    async with admin_running(config_of(sdk_spec(), tokens=TOKENS), tmp_path) as api:
        with trio.fail_after(30):
            async with auto_client(api.url, ALICE, elicitation_callback=elicit) as client:
                assert client.protocol_version == "2026-07-28"  # discover, not initialize
                tools = await client.list_tools()
                assert {"sdk_add", "sdk_count", "sdk_ask"} <= {tool.name for tool in tools.tools}
                added = await client.call_tool("sdk_add", {"a": 2, "b": 40})
                assert not added.is_error and added.content[0].text == "42"  # type: ignore[union-attr]

                seen: list[float] = []

                async def progress(value: float, total: float | None, message: str | None) -> None:
                    seen.append(value)

                counted = await client.call_tool("sdk_count", {"steps": 3}, progress_callback=progress)
                assert counted.content[0].text == "counted to 3"  # type: ignore[union-attr]
                assert seen == [1, 2, 3]

                answered = await client.call_tool("sdk_ask", {"question": "favourite colour?"})
                assert answered.content[0].text == "answered: blue"  # type: ignore[union-attr]
                assert asked == ["favourite colour?"]
            # No session was opened: the new era has none; its tenant's state is listed instead.
            listed = await api.http(ALICE).request("GET", "/v1/gateway/sessions")
            [state] = listed.json()["sessions"]
            assert (state["era"], state["tenant"], state["client"]["name"]) == ("2026-07-28", "alice", "mcp")
