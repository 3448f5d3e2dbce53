"""New-era (2026-07-28) clients across two replicas on one PostgreSQL store, with no
affinity: a ``tool_search`` answered by one replica activates its tools on the other,
and a "for the session" approval made through one applies on the other. A single
process on the same store without a ``cluster`` section shares nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.spec import ServerSpec
from supervisor.settings.model import (
    ClusterSettings,
    Config,
    GatewaySettings,
    StoreSettings,
    ToolSearchSettings,
)
from supervisor.store.postgres import open_postgres
from supervisor.store.tenant_rows import TENANT_CHANNEL
from tests.gateway.test_gateway_roaming import KEY, Replica, replica
from tests.gateway.test_gateway_stateless import VERSION, request
from tests.support.admin import Http, admin_running, config_of, mini_spec, wait_for

BASE = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION}


def shared_config(
    url: str, name: str | None, spec: ServerSpec, *, search: bool = True, idle_s: float = 1800.0
) -> Config:
    """A config on the store at ``url``; ``name``: a replica of a cluster (None: none)."""
    config = attrs.evolve(config_of(spec), gateway=GatewaySettings(session_idle_s=idle_s))
    if search:
        config = attrs.evolve(config, tool_search=ToolSearchSettings(enabled=True))
    cluster = None if name is None else ClusterSettings(name, (KEY,), heartbeat_s=0.1, ttl_s=0.6, drain_s=2.0)
    return attrs.evolve(config, store=StoreSettings(url=url), cluster=cluster)


@asynccontextmanager
async def two_replicas(
    url: str, tmp_path: Path, spec: ServerSpec, **options: Any
) -> AsyncIterator[tuple[Replica, Replica]]:
    """Replicas r1 and r2 of ``spec`` in this process, on the store at ``url``."""
    async with (
        replica(url, "r1", tmp_path / "r1", shared_config(url, "r1", spec, **options)) as r1,
        replica(url, "r2", tmp_path / "r2", shared_config(url, "r2", spec, **options)) as r2,
    ):
        yield r1, r2


async def new_era(http: Http, n: int, method: str, params: Mapping[str, Any] | None = None) -> Any:
    """One new-era request (``_meta`` in its params, the era's headers), its result."""
    headers = {**BASE, "Mcp-Method": method}
    if params is not None and "name" in params:
        headers["Mcp-Name"] = params["name"]
    reply = await http.request("POST", "/mcp", json=request(n, method, params), headers=headers)
    assert reply.status == 200, reply
    body = reply.json()
    assert "result" in body, body
    return body["result"]


async def listed(one: Replica, n: int) -> set[str]:
    return {tool["name"] for tool in (await new_era(one.http(), n, "tools/list"))["tools"]}


async def listed_with(one: Replica, tool: str, within_s: float) -> set[str]:
    """``one``'s listing once it shows ``tool`` (TooSlowError after ``within_s``)."""
    with trio.fail_after(within_s):
        while True:
            now = await listed(one, 100)
            if tool in now:
                return now
            await trio.sleep(0.02)


def rows(url: str, table: str) -> list[tuple[Any, ...]]:
    with open_postgres(url) as store:
        return store._read(f"SELECT * FROM {table}")


def drop_listeners(url: str) -> int:
    """End the replicas' tenant state listeners' connections, as a database restart would."""
    with open_postgres(url) as store:
        ended = store._read(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            f" WHERE datname = current_database() AND query = 'LISTEN {TENANT_CHANNEL}'"
        )
    return len(ended)


async def test_a_tool_search_on_one_replica_shows_its_tools_on_the_other(
    tmp_path: Path, postgres_url: str
) -> None:
    spec = mini_spec("mini")
    with trio.fail_after(60):
        async with two_replicas(postgres_url, tmp_path, spec) as (r1, r2):
            before = await listed(r2, 1)  # r2's state of the tenant is open from here
            assert "mini_echo" not in before and "tool_search" in before
            found = await new_era(
                r1.http(), 2, "tools/call", {"name": "tool_search", "arguments": {"query": "echo"}}
            )
            assert found["isError"] is False, found
            assert "mini_echo" in await listed(r1, 3)
            # r1 wrote the rows before it answered; r2 reads them at the announcement
            assert await listed_with(r2, "mini_echo", within_s=5) == await listed(r1, 5)
            assert any(row[2] == "mini_echo" for row in rows(postgres_url, "tenant_activations"))
            # a call through r2 of the tool r1 activated is answered
            echoed = await new_era(
                r2.http(), 6, "tools/call", {"name": "mini_echo", "arguments": {"text": "hop"}}
            )
            assert echoed["content"][0]["text"] == "hop"

            # the listeners' connections drop; what r1 adds meanwhile reaches r2 once its
            # listener is back (it reads every open state again)
            assert drop_listeners(postgres_url) == 2
            found = await new_era(
                r1.http(), 7, "tools/call", {"name": "tool_search", "arguments": {"query": "add"}}
            )
            assert found["isError"] is False, found
            assert await listed_with(r2, "mini_add_tool", within_s=10) == await listed(r1, 9)


async def test_a_for_the_session_approval_through_one_replica_applies_on_the_other(
    tmp_path: Path, postgres_url: str
) -> None:
    spec = mini_spec("mini", trusted=False)
    with trio.fail_after(60):
        async with two_replicas(postgres_url, tmp_path, spec, search=False) as (r1, r2):
            answers: list[Any] = []

            async def write(one: Replica, n: int, name: str) -> None:
                params = {"name": "mini_add_tool", "arguments": {"name": name}}
                answers.append(await new_era(one.http(), n, "tools/call", params))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(write, r1, 1, "first")
                pending = await wait_for(r1.http(), "/v1/approvals", lambda d: len(d["approvals"]) == 1)
                item = pending["approvals"][0]
                answer = {"decision": "allow", "remember": "session"}
                answered = await r1.http().request("POST", f"/v1/approvals/{item['id']}", json=answer)
                assert answered.status == 204, answered
            assert answers[0]["content"][0]["text"] == "added first"
            # r2 opens its state of the tenant with r1's approval: no question asked
            with trio.fail_after(10):
                await write(r2, 2, "second")
            assert answers[1]["content"][0]["text"] == "added second", answers
            assert (await r2.http().request("GET", "/v1/approvals")).json() == {"approvals": []}
            assert [row[2] for row in rows(postgres_url, "tenant_approvals")] == [item["permission"]]


async def test_the_rows_go_once_no_replica_used_the_tenant_for_the_idle_time(
    tmp_path: Path, postgres_url: str
) -> None:
    spec = mini_spec("mini")
    with trio.fail_after(60):
        async with two_replicas(postgres_url, tmp_path, spec, idle_s=0.5) as (r1, r2):
            found = await new_era(
                r1.http(), 1, "tools/call", {"name": "tool_search", "arguments": {"query": "echo"}}
            )
            assert found["isError"] is False, found
            # r2 keeps using the tenant: r1's state expires, the rows stay
            for n in range(2, 8):
                assert "mini_echo" in await listed_with(r2, "mini_echo", within_s=5), n
                await trio.sleep(0.2)
            assert rows(postgres_url, "tenant_activations")
            # nobody uses it: the last state to expire takes the rows with it
            with trio.fail_after(10):
                while True:
                    if not await trio.to_thread.run_sync(rows, postgres_url, "tenant_activations"):
                        break
                    await trio.sleep(0.1)
            assert rows(postgres_url, "tenant_uses") == []
            assert "mini_echo" not in await listed(r1, 9)  # a fresh state: nothing activated


async def test_a_single_process_on_a_shared_store_without_a_cluster_shares_nothing(
    tmp_path: Path, postgres_url: str
) -> None:
    config = shared_config(postgres_url, None, mini_spec("mini"))
    with trio.fail_after(30):
        async with admin_running(config, tmp_path) as api:
            http = api.http()
            found = await new_era(
                http, 1, "tools/call", {"name": "tool_search", "arguments": {"query": "echo"}}
            )
            assert found["isError"] is False, found
            names = {tool["name"] for tool in (await new_era(http, 2, "tools/list"))["tools"]}
            assert "mini_echo" in names
    for table in ("tenant_activations", "tenant_approvals", "tenant_uses"):
        assert rows(postgres_url, table) == [], table
