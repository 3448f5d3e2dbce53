"""Handshake-era sessions across two replicas on one PostgreSQL store: a request for a
session another live replica holds is passed on to it; a session whose holder is gone
(drained, or its heartbeat expired) is taken over with its activations and log level,
and the client never initializes again."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.spec import Scope, ServerSpec, Start
from supervisor import Supervisor
from supervisor.gateway.results import INVALID_PARAMS
from supervisor.settings.model import ClusterSettings, Config, StoreSettings, ToolSearchSettings
from supervisor.store.postgres import open_postgres
from tests.gateway.test_gateway_stateless import meta
from tests.support.admin import Http, admin_running, config_of, mini_spec
from tests.support.gateway_http import McpHttp, request

KEY = b"k" * 32
TTL_S = 0.6


def cluster_config(url: str, replica: str) -> Config:
    config = attrs.evolve(config_of(mini_spec("mini")), tool_search=ToolSearchSettings(enabled=True))
    cluster = ClusterSettings(replica, (KEY,), heartbeat_s=0.1, ttl_s=TTL_S, drain_s=2.0)
    return attrs.evolve(config, store=StoreSettings(url=url), cluster=cluster)


@attrs.define
class Replica:
    sup: Supervisor
    url: str

    def http(self) -> Http:
        return Http(self.url)


@asynccontextmanager
async def replica(url: str, name: str, state: Path, config: Config | None = None) -> AsyncIterator[Replica]:
    """One replica in this process (its heartbeats are the supervisor's own; ``config``:
    another than ``cluster_config``'s)."""
    config = config if config is not None else cluster_config(url, name)
    async with admin_running(config, state) as api, trio.open_nursery() as nursery:
        one = Replica(api.sup, api.url)
        yield one
        nursery.cancel_scope.cancel()


def session_row(url: str, session_id: str) -> Any:
    with open_postgres(url) as store:
        return store.session_row(session_id)


async def search(mcp: McpHttp, n: int, query: str) -> list[str]:
    found = await mcp.call(n, "tools/call", {"name": "tool_search", "arguments": {"query": query}})
    assert found["result"]["isError"] is False, found
    listed = await mcp.call(n + 1, "tools/list")
    return sorted(tool["name"] for tool in listed["result"]["tools"])


async def test_a_session_is_passed_on_to_its_live_holder_and_taken_over_when_it_drains(
    tmp_path: Path, postgres_url: str
) -> None:
    with trio.fail_after(60):
        async with replica(postgres_url, "r2", tmp_path / "r2") as r2:
            async with replica(postgres_url, "r1", tmp_path / "r1") as r1:
                mcp = McpHttp(r1.http())
                await mcp.open()
                assert mcp.session_id is not None and mcp.session_id.startswith("r1.")
                tools = await search(mcp, 1, "echo")
                assert "mini_echo" in tools
                level = await mcp.call(3, "logging/setLevel", {"level": "debug"})
                assert "error" not in level
                row = session_row(postgres_url, mcp.session_id)
                assert row.owner == r1.sup.replica.incarnation  # type: ignore[union-attr]
                assert json.loads(row.state)["log_level"] == "debug"

                # The same session through r2: passed on to r1, answered by it.
                via_r2 = McpHttp(r2.http())
                via_r2.session_id = mcp.session_id
                echoed = await via_r2.call(
                    4, "tools/call", {"name": "mini_echo", "arguments": {"text": "hop"}}
                )
                assert echoed["result"]["content"][0]["text"] == "hop"
                assert r2.sup.replica is not None and len(r1.sup.replica.incarnation) > 0  # type: ignore[union-attr]
                assert session_row(postgres_url, mcp.session_id).owner == r1.sup.replica.incarnation  # type: ignore[union-attr]
                # a made-up id of the same shape is unknown, with no store read needed
                forged = McpHttp(r2.http())
                forged.session_id = "r1.000000000000000000000000.AAAAAAAAAAAAAAAA"
                assert (await forged.post(request(5, "tools/list"))).status == 404
            # r1 drained (left its block): it handed the session over.
            assert session_row(postgres_url, mcp.session_id).owner is None
            again = await via_r2.call(6, "tools/list")
            assert sorted(tool["name"] for tool in again["result"]["tools"]) == tools  # same activations
            row = session_row(postgres_url, mcp.session_id)
            assert row.owner == r2.sup.replica.incarnation  # type: ignore[union-attr]
            assert json.loads(row.state)["log_level"] == "debug"
            deleted = await via_r2.http.request("DELETE", "/mcp", headers=via_r2.headers())
            assert deleted.status == 204
            assert session_row(postgres_url, mcp.session_id) is None


async def _no_beat() -> None:
    """A heartbeat that writes nothing (a replica cut off from the store)."""


async def test_a_session_whose_holder_stopped_beating_is_taken_over_once(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(60):
        async with (
            replica(postgres_url, "r1", tmp_path / "r1") as r1,
            replica(postgres_url, "r2", tmp_path / "r2") as r2,
        ):
            mcp = McpHttp(r1.http())
            await mcp.open()
            tools = await search(mcp, 1, "echo")
            # r1 looks dead: its last heartbeat names an address nobody answers at, and
            # then it beats no more (its process lives on, unaware).
            heartbeats = r1.sup.heartbeats
            assert heartbeats is not None
            heartbeats.address = "http://127.0.0.1:9"
            row = None
            with trio.fail_after(5):
                while row is None or row.address != heartbeats.address:
                    await trio.sleep(0.05)
                    row = await heartbeats.run_of(r1.sup.replica.incarnation)  # type: ignore[union-attr]
            monkeypatch.setattr(heartbeats, "_write_beat", _no_beat)
            moved = McpHttp(r2.http())
            moved.session_id = mcp.session_id
            started = trio.current_time()
            async with trio.open_nursery() as nursery:  # two requests at once: one takeover
                answers: list[Any] = []

                async def ask(n: int) -> None:
                    answers.append(await moved.call(n, "tools/list"))

                nursery.start_soon(ask, 10)
                nursery.start_soon(ask, 11)
            assert trio.current_time() - started < TTL_S + 2
            for answer in answers:
                assert sorted(tool["name"] for tool in answer["result"]["tools"]) == tools
            gateway_r2 = r2.sup.replica
            assert gateway_r2 is not None
            assert session_row(postgres_url, mcp.session_id).owner == gateway_r2.incarnation  # type: ignore[arg-type]
            # r1's copy is stale: its next save is refused, it lets the session go, and
            # from then on passes the session's requests on to r2, its holder now.
            stale = await mcp.post(request(12, "logging/setLevel", {"level": "info"}))
            assert stale.status == 200
            listed = await r1.http().request("GET", "/v1/gateway/sessions")
            assert mcp.session_id not in [item["session_id"] for item in listed.json()["sessions"]]
            relayed = await mcp.call(13, "tools/list")
            assert sorted(tool["name"] for tool in relayed["result"]["tools"]) == tools
            assert session_row(postgres_url, mcp.session_id).owner == gateway_r2.incarnation  # type: ignore[arg-type]


async def test_a_new_era_retry_reaches_the_replica_holding_its_call(
    tmp_path: Path, postgres_url: str
) -> None:
    """The call stays parked on r1 (a handshake-era backend mid-call); the client's
    retry lands on r2, which passes it on: the same call finishes, once."""
    from supervisor.gateway.peer import PASSED_ON
    from tests.end_to_end.test_everything_surface import FORM_TOOL
    from tests.end_to_end.test_real_peers import EVERYTHING
    from tests.gateway.test_gateway_hangup import headers_of

    if not EVERYTHING.exists():
        pytest.skip("@modelcontextprotocol/server-everything is not installed (.ci/setup installs it)")
    spec = ServerSpec(name="everything", command=(str(EVERYTHING), "stdio"), trusted=True, start=Start.EAGER)
    base = attrs.evolve(cluster_config(postgres_url, "r1"), servers=(spec,), tool_search=ToolSearchSettings())

    @asynccontextmanager
    async def with_everything(name: str) -> AsyncIterator[Replica]:
        config = attrs.evolve(base, cluster=attrs.evolve(base.cluster, replica=name))  # type: ignore[arg-type]
        opened = admin_running(config, tmp_path / name, client_capabilities=PASSED_ON)
        async with opened as api, trio.open_nursery() as nursery:
            one = Replica(api.sup, api.url)
            yield one
            nursery.cancel_scope.cancel()

    def call(state: str | None = None, responses: Any = None) -> dict[str, Any]:
        caps = {"elicitation": {}, "roots": {}}
        params: dict[str, Any] = {"name": FORM_TOOL, "arguments": {}, "_meta": meta(caps)}
        if state is not None:
            params |= {"requestState": state, "inputResponses": responses}
        return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}

    with trio.fail_after(60):
        async with with_everything("r1") as r1, with_everything("r2") as r2:
            first = call()
            asked = await r1.http().request(
                "POST", "/mcp", json=first, headers=headers_of(first, "application/json")
            )
            result = asked.json()["result"]
            assert result["resultType"] == "input_required", result
            answers = {"elicitation/create": {"action": "accept", "content": {"name": "from-r2"}}}
            answers["roots/list"] = {"roots": []}
            rounds = 0
            while result.get("resultType") == "input_required":  # every retry lands on r2
                rounds += 1
                asks = result["inputRequests"].items()
                retry = call(result["requestState"], {key: answers[ask["method"]] for key, ask in asks})
                done = await r2.http().request(
                    "POST", "/mcp", json=retry, headers=headers_of(retry, "application/json")
                )
                assert done.status == 200, done
                result = done.json()["result"]
            assert rounds >= 1 and "from-r2" in json.dumps(result), result
            assert done.headers.get("date", "").count("GMT") <= 1  # the relay's own, once
            # the same state again, through either replica: the call is over, nothing runs twice
            again = await r2.http().request(
                "POST", "/mcp", json=retry, headers=headers_of(retry, "application/json")
            )
            assert again.json()["error"]["code"] == INVALID_PARAMS


async def test_a_sessions_own_server_starts_again_on_the_replica_that_took_it_over(
    tmp_path: Path, postgres_url: str
) -> None:
    """A ``scope: session`` server does not move: the replica taking the session over
    starts a process of its own for it (the old one went with the drained replica)."""
    own = mini_spec("own", "--whoami", scope=Scope.SESSION, start=Start.LAZY)

    def with_own(name: str) -> Config:
        return attrs.evolve(cluster_config(postgres_url, name), servers=(mini_spec("mini"), own))

    async def pid_of(mcp: McpHttp, n: int) -> int:
        who = await mcp.call(n, "tools/call", {"name": "own_whoami"})
        return int(json.loads(who["result"]["content"][0]["text"])["pid"])

    with trio.fail_after(60):
        async with replica(postgres_url, "r2", tmp_path / "r2", with_own("r2")) as r2:
            async with replica(postgres_url, "r1", tmp_path / "r1", with_own("r1")) as r1:
                mcp = McpHttp(r1.http())
                await mcp.open()
                before = await pid_of(mcp, 1)
            moved = McpHttp(r2.http())
            moved.session_id, moved.version = mcp.session_id, mcp.version
            after = await pid_of(moved, 2)
            assert after != before
            with pytest.raises(ProcessLookupError):
                os.kill(before, 0)  # the drained replica's process is gone
