"""Resource subscriptions through ``/mcp`` across the protocol eras, with real
processes: the official SDK's clients (``mode="legacy"``: the handshake era's
``resources/subscribe``; the default mode: the 2026-07-28 era's ``subscriptions/listen``)
against the real admin server fronting the conformance fixture, once in the per-request
era (``protocol: auto``) and once pinned to the handshake era. The fixture's
``test_update_watched_resource`` announces an update of its watched resource. The
fixture runs over stdio, and in the per-request era over Streamable HTTP too, where a
resource subscription is a POST held open (``actors/transports/held_listens.py``)."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
import trio
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated as ListenUpdate
from mcp.types import ResourceUpdatedNotification, TextContent

from actors.connection.states import State
from actors.connection.vocabulary import Control
from actors.router.catalog import Catalog
from actors.spec import ServerSpec, Start
from supervisor.settings.model import GatewaySettings, ToolSearchSettings
from tests.support.admin import ALICE, TOKENS, Running, admin_running, config_of
from tests.support.http_processes import free_port, listening_process
from tests.support.paths import SERVERS

# The handshake-era client's subscribe_resource warns that the new era removed it; it is
# the point here.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

WATCHED = "test://watched-resource"
# The fixture's era behind the gateway (per-request, handshake), and how it is reached.
BACKENDS = [("auto", "stdio"), ("2025-11-25", "stdio"), ("auto", "http")]
QUIET_S = 0.5  # how long a client that should hear nothing is listened to


class Heard:
    """The ``notifications/resources/updated`` one handshake-era client received."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._news = trio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self._news.set()
            self._news = trio.Event()

    async def until(self, count: int) -> None:
        with trio.fail_after(10):
            while len(self.uris) < count:
                await self._news.wait()


@asynccontextmanager
async def gateway(protocol: str, reached: str, tmp_path: Path) -> AsyncIterator[Running]:
    command = (sys.executable, str(SERVERS / "everything_server.py"))
    common: dict[str, Any] = {"start": Start.EAGER, "trusted": True, "protocol": protocol}
    async with AsyncExitStack() as stack:
        if reached == "http":
            port = free_port()
            await stack.enter_async_context(
                listening_process([*command, "--http", str(port)], port, "fixture")
            )
            spec = ServerSpec(name="everything", type="remote", url=f"http://127.0.0.1:{port}/mcp", **common)
        else:
            spec = ServerSpec(name="everything", command=command, shutdown_grace_s=0.5, **common)
        config = attrs.evolve(
            config_of(spec, tokens=TOKENS),
            gateway=GatewaySettings(prefix=False),
            tool_search=ToolSearchSettings(enabled=False),
        )
        yield await stack.enter_async_context(admin_running(config, tmp_path))


def client(api: Running, *, legacy: bool, heard: Heard | None = None) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=10)
    transport = streamable_http_client(f"{api.url}/mcp", http_client=http)
    return Client(transport, mode="legacy" if legacy else "auto", message_handler=heard)


async def touch(client: Client) -> tuple[str, int]:
    """Have the fixture announce an update of the watched resource; what it had been
    told: whether ``resources/subscribe`` was sent, and how many listen streams want it."""
    result = await client.call_tool("test_update_watched_resource", {})
    assert not result.is_error, result
    first = result.content[0]
    assert isinstance(first, TextContent)
    found = re.search(r"resources/subscribe: (yes|no); listen streams: (\d+)", first.text)
    assert found is not None, first.text
    return found[1], int(found[2])


def told(protocol: str, *, subscribed: bool) -> tuple[str, int]:
    """What a backend of ``protocol``'s era is told of one subscription, or of none."""
    if not subscribed:
        return ("no", 0)
    return ("no", 1) if protocol == "auto" else ("yes", 0)


async def until_told(client: Client, expected: tuple[str, int]) -> None:
    """Touch until the backend has been told ``expected`` (no subscriber is left to
    hear the updates): a subscription that ends reaches the server without our wait."""
    with trio.fail_after(10):
        while True:
            if await touch(client) == expected:
                return
            await trio.sleep(0.1)


@pytest.mark.parametrize(("protocol", "reached"), BACKENDS)
async def test_a_handshake_client_hears_the_updates_it_subscribed_to_and_no_others(
    protocol: str, reached: str, tmp_path: Path
) -> None:
    ada_heard, bob_heard = Heard(), Heard()
    async with gateway(protocol, reached, tmp_path) as api:
        with trio.fail_after(60):
            async with (
                client(api, legacy=True, heard=ada_heard) as ada,
                client(api, legacy=True, heard=bob_heard) as bob,
            ):
                await ada.subscribe_resource(WATCHED)
                assert await touch(bob) == told(protocol, subscribed=True)
                await ada_heard.until(1)
                await bob.subscribe_resource(WATCHED)
                assert await touch(bob) == told(protocol, subscribed=True)  # one for both clients
                await bob_heard.until(1)
                await ada_heard.until(2)
                assert bob_heard.uris == [WATCHED]  # not the update before it subscribed

                await ada.unsubscribe_resource(WATCHED)
                assert await touch(ada) == told(protocol, subscribed=True)  # bob still wants it
                await bob_heard.until(2)
                await trio.sleep(QUIET_S)
                assert ada_heard.uris == [WATCHED, WATCHED]  # none after it unsubscribed

                await bob.unsubscribe_resource(WATCHED)
                await until_told(ada, told(protocol, subscribed=False))
                await trio.sleep(QUIET_S)
                assert (len(ada_heard.uris), len(bob_heard.uris)) == (2, 2)


@pytest.mark.parametrize(("protocol", "reached"), BACKENDS)
async def test_a_new_era_client_hears_updates_on_its_listen_stream_until_it_hangs_up(
    protocol: str, reached: str, tmp_path: Path
) -> None:
    bob_heard = Heard()
    async with gateway(protocol, reached, tmp_path) as api:
        with trio.fail_after(60):
            async with client(api, legacy=False) as ada, client(api, legacy=True, heard=bob_heard) as bob:
                assert ada.protocol_version == "2026-07-28"
                async with ada.listen(resource_subscriptions=[WATCHED]) as listening:
                    assert listening.honored.resource_subscriptions == [WATCHED]
                    assert await touch(bob) == told(protocol, subscribed=True)
                    with trio.fail_after(10):
                        event = await listening.__anext__()
                    assert event == ListenUpdate(uri=WATCHED)
                await until_told(bob, told(protocol, subscribed=False))  # the hang-up reached it

                await bob.subscribe_resource(WATCHED)  # and the other way round
                assert await touch(ada) == told(protocol, subscribed=True)
                await bob_heard.until(1)
                assert bob_heard.uris == [WATCHED]
                await bob.unsubscribe_resource(WATCHED)
                await until_told(ada, told(protocol, subscribed=False))


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
async def test_a_handshake_session_that_ends_leaves_its_subscriptions(protocol: str, tmp_path: Path) -> None:
    async with gateway(protocol, "stdio", tmp_path) as api:
        with trio.fail_after(60):
            async with client(api, legacy=False) as bob:
                async with client(api, legacy=True) as ada:
                    await ada.subscribe_resource(WATCHED)
                    assert await touch(bob) == told(protocol, subscribed=True)
                await until_told(bob, told(protocol, subscribed=False))  # its session ended


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
async def test_a_subscription_outlives_a_restart_of_the_backend(protocol: str, tmp_path: Path) -> None:
    heard = Heard()
    async with gateway(protocol, "stdio", tmp_path) as api:
        with trio.fail_after(60):
            async with client(api, legacy=True, heard=heard) as ada:
                await ada.subscribe_resource(WATCHED)
                before = api.sup.servers()["everything"].since
                await api.sup.command("everything", Control.RESTART)

                def steady_again(catalog: Catalog) -> bool:
                    view = catalog.servers["everything"]
                    return view.state is State.STEADY and view.since > before

                await api.sup.router.cell.wait_until(steady_again)
                while not heard.uris:  # the new process is subscribed soon after it listed
                    await touch(ada)
                    with trio.move_on_after(0.5):
                        await heard.until(1)
                assert heard.uris[0] == WATCHED
