"""Every client meets every backend, with no fakes: the official SDK's client in each
era (``mode="legacy"``: the handshake era; ``mode="auto"``: 2026-07-28) through
``/mcp`` of a real ``serve`` stack, to two real SDK servers over Streamable HTTP, one
spoken to in each era (tests/servers/cross_era_server.py, pinned ``2025-11-25`` and
``auto``). Both clients are one tenant, so nothing but the gateway's routing keeps
them apart.

Each client, on both backends at once: sampling, elicitation and roots (one
``interview``), log messages at four levels (``chatter``) and an update of the resource
it subscribed to (``touch``); all eight calls run interleaved. Every answer, request
and notification names the caller it was made for: a client must see only its own,
the log messages at or above its own level, and the updates of its own resources.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
import trio
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent
from pydantic import FileUrl

from actors.spec import ServerSpec, Start
from supervisor.gateway.peer import PASSED_ON
from tests.end_to_end.test_real_peers import needs_module
from tests.support.admin import ALICE, TOKENS, Running, admin_running, config_of, until
from tests.support.http_processes import free_port, listening_process
from tests.support.paths import SERVERS

CROSS = str(SERVERS / "cross_era_server.py")
# The SDK's client warns that logging and subscribe are the old era's: said, and meant.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
BACKENDS = {"old": "2025-11-25", "new": "auto"}
LEVELS = ("debug", "info", "warning", "error")


@attrs.define
class Seen:
    """What one client was asked and told."""

    name: str
    asked: list[str] = attrs.Factory(list)
    logs: set[str] = attrs.Factory(set)
    updates: set[str] = attrs.Factory(set)
    silent: bool = False
    """Never answer sampling (the call must end at the server's cap)."""

    def callbacks(self) -> dict[str, Any]:
        async def sampling(context: Any, params: Any) -> CreateMessageResult:
            self.asked.append(f"sampling {params.messages[0].content.text}")
            if self.silent:
                await trio.sleep_forever()
            reply = TextContent(type="text", text=f"model-of-{self.name}")
            return CreateMessageResult(role="assistant", content=reply, model="scripted")

        async def elicitation(context: Any, params: Any) -> ElicitResult:
            self.asked.append(f"elicitation {params.message}")
            return ElicitResult(action="accept", content={"name": f"person-{self.name}"})

        async def roots(context: Any) -> ListRootsResult:
            self.asked.append("roots")
            return ListRootsResult(
                roots=[Root(uri=FileUrl(f"file:///{self.name}"), name=f"root-{self.name}")]
            )

        async def logged(params: Any) -> None:
            self.logs.add(str(params.data))

        async def message(item: Any) -> None:
            uri = getattr(getattr(item, "params", None), "uri", None)
            if getattr(item, "method", "") == "notifications/resources/updated" and uri is not None:
                self.updates.add(str(uri))

        return {
            "sampling_callback": sampling,
            "elicitation_callback": elicitation,
            "list_roots_callback": roots,
            "logging_callback": logged,
            "message_handler": message,
        }


def backend_spec(name: str, port: int, **options: Any) -> ServerSpec:
    options.setdefault("call_timeout_s", 30.0)
    return ServerSpec(
        name=name,
        type="remote",
        url=f"http://127.0.0.1:{port}/mcp",
        transport="streamable-http",
        protocol=BACKENDS[name],
        trusted=True,
        start=Start.EAGER,
        shutdown_grace_s=0.3,
        **options,
    )


@asynccontextmanager
async def two_backends() -> AsyncIterator[dict[str, int]]:
    """cross_era_server.py twice over Streamable HTTP; their ports by backend name."""
    needs_module("mcp")
    ports = {name: free_port() for name in BACKENDS}
    async with AsyncExitStack() as stack:
        for name, port in ports.items():
            command = [sys.executable, CROSS, "--http", str(port)]
            await stack.enter_async_context(listening_process(command, port, f"cross_era_server.py ({name})"))
        yield ports


@asynccontextmanager
async def gateway(ports: dict[str, int], tmp_path: Path, **options: Any) -> AsyncIterator[Running]:
    """``serve``'s stack over both backends, telling them what ``serve`` tells them."""
    config = config_of(*(backend_spec(name, port, **options) for name, port in ports.items()), tokens=TOKENS)
    async with admin_running(config, tmp_path, client_capabilities=PASSED_ON) as api:
        with trio.fail_after(30):
            await api.sup.router.cell.wait_until(lambda c: {"old_touch", "new_touch"} <= set(c.tools))
        assert api.sup.servers()["old"].protocol_version == "2025-11-25"
        assert api.sup.servers()["new"].protocol_version == "2026-07-28"
        yield api


async def audited(api: Running, tool: str, outcome: str, timeout_s: float) -> None:
    """Until the audit row of the one call of ``tool`` is there and says ``outcome``."""
    with trio.fail_after(timeout_s):
        while True:
            await api.sup.store.flush()
            rows = await api.sup.store.read(lambda s: s.audit_rows(limit=100))
            if [row.outcome for row in rows if row.tool == tool] == [outcome]:
                return
            await trio.sleep(0.05)


def client(url: str, mode: str, seen: Seen, **options: Any) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=20)
    return Client(
        streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, **seen.callbacks(), **options
    )


def mine(name: str) -> Sequence[str]:
    """The resource URIs of ``name``'s, as the gateway shows them (two servers publish
    ``cross://<name>``, so the qualified form)."""
    return [f"mcp-supervisor://{backend}/cross://{name}" for backend in BACKENDS]


async def three_calls(session: Client, name: str, backend: str, results: dict[str, str]) -> None:
    for tool in ("interview", "chatter", "touch"):
        try:
            result = await session.call_tool(f"{backend}_{tool}", {"caller": name})
        except Exception as exc:  # named in the assertion, with the other calls' answers
            results[f"{name} {backend} {tool}"] = f"raised {exc!r}"
            continue
        text = result.content[0].text if isinstance(result.content[0], TextContent) else "?"
        results[f"{name} {backend} {tool}"] = f"error: {text}" if result.is_error else text


async def test_two_clients_of_two_eras_through_two_backends_of_two_eras_see_only_their_own(
    tmp_path: Path,
) -> None:
    a, b = Seen("a"), Seen("b")
    results: dict[str, str] = {}
    async with two_backends() as ports, gateway(ports, tmp_path) as api:
        with trio.fail_after(60):
            async with (
                client(api.url, "legacy", a) as legacy,
                client(api.url, "auto", b, log_level="info") as modern,
            ):
                assert legacy.protocol_version == "2025-11-25"
                assert modern.protocol_version == "2026-07-28"
                await legacy.set_logging_level("warning")
                for uri in mine("a"):
                    await legacy.subscribe_resource(uri)
                async with modern.listen(resource_subscriptions=mine("b")) as stream:

                    async def b_updates() -> None:
                        async for event in stream:
                            uri = getattr(event, "uri", None)
                            if uri is not None:
                                b.updates.add(str(uri))

                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(b_updates)
                        async with trio.open_nursery() as calls:
                            for backend in BACKENDS:
                                calls.start_soon(three_calls, legacy, "a", backend, results)
                                calls.start_soon(three_calls, modern, "b", backend, results)
                        # Updates are notifications: let them land.
                        await until(lambda: a.updates == set(mine("a")) and b.updates == set(mine("b")))
                        nursery.cancel_scope.cancel()

    assert not [text for text in results.values() if text.startswith(("raised", "error"))], results
    for seen in (a, b):
        name = seen.name
        for backend in BACKENDS:
            assert results[f"{name} {backend} interview"] == (
                f"for {name}: model=model-of-{name} person=person-{name} roots=root-{name}"
            )
            assert results[f"{name} {backend} touch"] == f"touched cross://{name}"
        # Asked once per backend, and only its own questions.
        assert sorted(seen.asked) == sorted(
            [f"sampling who is {name}?", f"elicitation confirm {name}", "roots"] * len(BACKENDS)
        ), seen.asked
        assert seen.updates == set(mine(name))
    # Each its own level: a asked for warning (logging/setLevel), b for info (per request).
    assert a.logs == {"a warning", "a error"}, a.logs
    assert b.logs == {"b info", "b warning", "b error"}, b.logs


async def call_into(session: Client, tool: str, answered: list[Any]) -> None:
    answered.append(await session.call_tool(tool, {"caller": "c"}))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_answer_that_never_comes_ends_the_call_at_the_servers_cap(tmp_path: Path, mode: str) -> None:
    """A client that never answers the backend's question (either era, either way
    round): the call ends as a timeout at ``max_call_s``, on both backends."""
    silent = Seen("c", silent=True)
    async with (
        two_backends() as ports,
        gateway(ports, tmp_path, max_call_s=1.5) as api,
        client(api.url, mode, silent) as session,
    ):
        for backend in BACKENDS:
            tool = f"{backend}_interview"
            answered: list[Any] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call_into, session, tool, answered)
                await audited(api, tool, "timeout", timeout_s=6)
                if mode == "legacy":  # told at once; a new-era client waits in its callback
                    await until(lambda: bool(answered), timeout_s=2)  # noqa: B023 (awaited here)
                    assert answered[0].is_error and "within 1.5 s" in str(answered[0].content[0])
                nursery.cancel_scope.cancel()
    assert silent.asked.count("sampling who is c?") == len(BACKENDS), silent.asked


async def test_a_client_that_hangs_up_mid_question_has_its_calls_cancelled_on_both_backends(
    tmp_path: Path,
) -> None:
    """A handshake-era client asked by either backend goes away (its session ends)
    before answering: both calls end as ``cancelled`` at once, long before the cap.
    (A 2026-07-28 client has nothing open to hang up once it holds an input-required
    result; its call ends at the cap, as above.)"""
    silent = Seen("d", silent=True)
    async with two_backends() as ports, gateway(ports, tmp_path, max_call_s=60.0) as api:
        with trio.fail_after(20):
            async with client(api.url, "legacy", silent) as session, trio.open_nursery() as nursery:
                for backend in BACKENDS:
                    nursery.start_soon(session.call_tool, f"{backend}_interview", {"caller": "d"})
                await until(lambda: silent.asked.count("sampling who is d?") == len(BACKENDS))
                nursery.cancel_scope.cancel()  # then the client's exit ends its session
            for backend in BACKENDS:
                await audited(api, f"{backend}_interview", "cancelled", timeout_s=5)
