"""The official SDK's Streamable HTTP client (handshake mode) against ``/mcp`` on the
real admin server, fronting mini_server.py: initialize, list, call, progress, and a
cancel that reaches the backend."""

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
from tests.support.admin import ALICE, BOB, TOKENS, admin_running, config_of, mini_spec
from tests.support.paths import SERVERS

SDK_SERVER = str(SERVERS / "sdk_server.py")


def sdk_client(url: str, token: str, *, elicitation: Any = None, sampling: Any = None) -> Client:
    """The SDK's client over Streamable HTTP, initialize handshake (``mode="legacy"``)."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=10)
    transport = streamable_http_client(f"{url}/mcp", http_client=http)
    return Client(transport, mode="legacy", elicitation_callback=elicitation, sampling_callback=sampling)


async def test_the_sdk_client_lists_calls_sees_progress_and_its_cancel_reaches_the_backend(
    tmp_path: Path,
) -> None:
    methods = tmp_path / "methods.log"
    config = config_of(mini_spec("mini", "--methods-log", str(methods)), tokens=TOKENS)
    async with admin_running(config, tmp_path) as api:
        with trio.fail_after(20):
            async with sdk_client(api.url, ALICE) as client:
                assert client.protocol_version == "2025-11-25"
                tools = await client.list_tools()
                assert {"mini_echo", "mini_progress", "mini_sleep"} <= {tool.name for tool in tools.tools}
                echoed = await client.call_tool("mini_echo", {"text": "through the gateway"})
                assert echoed.content[0].text == "through the gateway" and not echoed.is_error  # type: ignore[union-attr]

                seen: list[float] = []

                async def progress(value: float, total: float | None, message: str | None) -> None:
                    seen.append(value)

                done = await client.call_tool(
                    "mini_progress", {"steps": 3, "interval": 0.02}, progress_callback=progress
                )
                assert done.content[0].text == "done after 3 steps"  # type: ignore[union-attr]
                assert seen == [1, 2, 3]

                with trio.move_on_after(0.5):  # the SDK sends notifications/cancelled
                    await client.call_tool("mini_sleep", {"seconds": 30})
                began = trio.current_time()
                while "notifications/cancelled" not in _methods(methods):
                    assert trio.current_time() - began < 5, _methods(methods)
                    await trio.sleep(0.02)
                assert (await client.call_tool("mini_echo", {"text": "still here"})).content[
                    0
                ].text == "still here"  # type: ignore[union-attr]
            # The client's exit sent DELETE: the session is gone.
            listed = await api.http(ALICE).request("GET", "/v1/gateway/sessions")
            assert listed.json()["sessions"] == []


def _methods(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


async def test_two_clients_of_one_eliciting_backend_each_get_only_their_own_question(tmp_path: Path) -> None:
    spec = ServerSpec(
        name="sdk",
        command=(sys.executable, SDK_SERVER),
        start=Start.EAGER,
        trusted=True,
        protocol="2025-11-25",
    )  # the handshake era: elicitation is a request of the server's own
    async with admin_running(config_of(spec, tokens=TOKENS), tmp_path) as api:
        asked: dict[str, list[str]] = {"a": [], "b": []}

        def answering(who: str) -> Any:
            async def elicit(context: Any, params: ElicitRequestParams) -> ElicitResult:
                asked[who].append(params.message)
                return ElicitResult(action="accept", content={"answer": f"{who} says yes"})

            return elicit

        with trio.fail_after(30):
            async with (
                sdk_client(api.url, ALICE, elicitation=answering("a")) as a,
                sdk_client(api.url, BOB, elicitation=answering("b")) as b,
            ):
                first = await a.call_tool("sdk_ask", {"question": "for a"})
                second = await b.call_tool("sdk_ask", {"question": "for b"})
                assert first.content[0].text == "answered: a says yes"  # type: ignore[union-attr]
                assert second.content[0].text == "answered: b says yes"  # type: ignore[union-attr]
                # At once: a request that could be either's goes to neither, never to the other.
                texts: dict[str, str] = {}

                async def ask(who: str, client: Client) -> None:
                    result = await client.call_tool("sdk_ask", {"question": f"again {who}"})
                    texts[who] = result.content[0].text  # type: ignore[union-attr]

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(ask, "a", a)
                    nursery.start_soon(ask, "b", b)
                assert "b says" not in texts["a"] and "a says" not in texts["b"], texts
        assert set(asked["a"]) <= {"for a", "again a"} and "for a" in asked["a"]
        assert set(asked["b"]) <= {"for b", "again b"} and "for b" in asked["b"]
