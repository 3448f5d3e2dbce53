"""Exposure lists and rate limits through every way in, against a real ``mini_server.py
--surface`` behind the real admin server: the embedding, the admin API, the CLI, ``/mcp``
in both eras and the stdio front.

Alice may not see the tool ``add``, the resource ``mini://notes`` or the prompt
``greet``; bob sees everything. For alice each is absent from every listing, and a
call, read or get of it is unknown, as of an item no server has, with its audit row.
Every tenant may call ``echo`` once (a bucket of one that refills in 1,000 s): the
second call is ``rate_limited`` with ``retry_after_ms``, on every way in as ``busy`` is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.router.envelope import Envelope
from actors.router.exposure import Lists, ServerRule
from supervisor.gateway.results import ERROR_META, INVALID_PARAMS, RESOURCE_NOT_FOUND
from supervisor.settings.model import Config, ExposureRule, RateLimit
from tests.admin.test_admin_surface import run_cli
from tests.gateway.test_gateway_stateless import VERSION, request
from tests.gateway.test_stdio_front import CLI, INITIALIZE, rpc
from tests.support.admin import (
    ALICE,
    BOB,
    TOKENS,
    Http,
    Running,
    admin_running,
    config_of,
    mini_spec,
    wait_for,
)
from tests.support.gateway_http import McpHttp
from tests.support.paths import SERVERS

HIDDEN = ServerRule(
    "mini",
    tools=Lists(deny=("add",)),
    resources=Lists(deny=("mini://notes",)),
    prompts=Lists(deny=("greet",)),
)
ONE_ECHO = RateLimit(0.001, 1, tenant="*", tool="echo")
ADD = {"a": 1, "b": 2}


def config() -> Config:
    base = config_of(mini_spec("mini", "--surface"), tokens=TOKENS)
    return attrs.evolve(base, exposure=(ExposureRule("alice", HIDDEN),), limits=(ONE_ECHO,))


def code(envelope: Envelope | dict[str, Any]) -> str | None:
    body = envelope.as_dict() if isinstance(envelope, Envelope) else envelope
    return None if body["ok"] else body["error"]["code"]


def assert_rate_limited(body: dict[str, Any]) -> None:
    assert body["ok"] is False and body["error"]["code"] == "rate_limited", body
    assert 0 < body["error"]["retry_after_ms"] <= 1_000_000
    assert body["error"]["message"].startswith("rate limit reached for tenant ")


async def audited(api: Running, tenant: str) -> list[tuple[str, str]]:
    await api.sup.store.flush()
    rows = await api.sup.store.read(lambda s: s.audit_rows(tenant=tenant, limit=1000))
    return [(row.tool, row.outcome) for row in reversed(rows)]


async def test_the_embedding_hides_from_one_tenant_what_another_sees(tmp_path: Path) -> None:
    async with admin_running(config(), tmp_path) as api:
        with trio.fail_after(30):
            async with api.sup.session(tenant="alice") as alice, api.sup.session(tenant="bob") as bob:
                a, b = await alice.begin_turn(), await bob.begin_turn()
                assert a.epoch == b.epoch
                a_tools, b_tools = [t["id"] for t in a.listing()], [t["id"] for t in b.listing()]
                assert "mini_echo" in a_tools and "mini_add" not in a_tools and "mini_add" in b_tools
                assert a.resource_listing() == a.prompt_listing() == []
                assert [r["uri"] for r in b.resource_listing()] == ["mini://notes"]
                assert [p["id"] for p in b.prompt_listing()] == ["mini_greet"]
                assert "mini_add" not in [m["id"] for m in a.search("add two numbers")["matches"]]
                assert [m["id"] for m in b.search("add two numbers")["matches"]][:1] == ["mini_add"]

                greet = {"type": "ref/prompt", "name": "mini_greet"}
                assert code(await a.call("mini_add", ADD)) == "unknown_tool"
                assert code(await a.read_resource("mini://notes")) == "unknown_resource"
                assert code(await a.read_resource("mini://notes", "mini")) == "unknown_resource"
                assert code(await a.get_prompt("mini_greet", {"who": "Ada"})) == "unknown_prompt"
                assert code(await a.complete(greet, {"name": "who", "value": ""})) == "unknown_prompt"
                assert code(await alice.subscribe("mini://notes", "mini")) == "unknown_resource"
                assert (await b.call("mini_add", ADD)).text == "3"
                assert (await b.read_resource("mini://notes")).text == "mini notes"
                assert (await b.get_prompt("mini_greet", {"who": "Ada"})).text == "Hello, Ada"

                assert (await a.call("mini_echo", {"text": "once"})).ok
                assert_rate_limited((await a.call("mini_echo", {"text": "twice"})).as_dict())
                assert (await b.call("mini_echo", {"text": "bob's own bucket"})).ok

            assert await audited(api, "alice") == [
                ("mini_add", "unknown_tool"),
                ("mini://notes", "unknown_resource"),
                ("mini://notes", "unknown_resource"),
                ("mini_greet", "unknown_prompt"),
                ("completion:mini_greet", "unknown_prompt"),
                ("mini_echo", "ok"),
                ("mini_echo", "rate_limited"),
            ]
            metrics = api.sup.metrics.render({}, 0, 0)
            assert 'mcp_supervisor_rate_limited_total{tenant="alice",server="mini"} 1' in metrics
            assert 'tenant="bob"' not in metrics


async def tool_ids(http: Http) -> list[str]:
    return [t["id"] for t in (await http.request("GET", "/v1/tools")).json()["tools"]]


async def test_the_admin_api_hides_from_one_tenant_what_another_sees(tmp_path: Path) -> None:
    async with admin_running(config(), tmp_path) as api:
        with trio.fail_after(30):
            alice, bob = api.http(ALICE), api.http(BOB)
            await wait_for(alice, "/v1/servers/mini", lambda d: d["state"] == "steady")
            assert "mini_add" not in await tool_ids(alice) and "mini_add" in await tool_ids(bob)
            counted = [
                (await h.request("GET", "/v1/servers")).json()["servers"][0]["tools"] for h in (alice, bob)
            ]
            assert counted[0] == counted[1] - 1  # each counts the tools it sees

            for http, sees in ((alice, False), (bob, True)):
                sid = await http.session()
                turn = await http.turn(sid)
                assert ("mini_add" in [t["id"] for t in turn["tools"]]) is sees
                base = f"/v1/sessions/{sid}/turns/{turn['turn_id']}"
                resources = (await http.request("GET", f"{base}/resources")).json()["resources"]
                prompts = (await http.request("GET", f"{base}/prompts")).json()["prompts"]
                assert (resources != []) is sees and (prompts != []) is sees
                added = (await http.call(sid, turn["turn_id"], "mini_add", ADD)).json()
                read = await http.request("POST", f"{base}/resources/read", json={"uri": "mini://notes"})
                got = await http.request(
                    "POST", f"{base}/prompts/get", json={"id": "mini_greet", "arguments": {"who": "x"}}
                )
                envelopes = (added, read.json(), got.json())
                if sees:
                    assert all(envelope["ok"] for envelope in envelopes)
                else:
                    assert [code(e) for e in envelopes] == [
                        "unknown_tool",
                        "unknown_resource",
                        "unknown_prompt",
                    ]
                assert (await http.call(sid, turn["turn_id"], "mini_echo", {"text": "1"})).json()["ok"]
                assert_rate_limited(
                    (await http.call(sid, turn["turn_id"], "mini_echo", {"text": "2"})).json()
                )

            assert await audited(api, "alice") == [
                ("mini_add", "unknown_tool"),
                ("mini://notes", "unknown_resource"),
                ("mini_greet", "unknown_prompt"),
                ("mini_echo", "ok"),
                ("mini_echo", "rate_limited"),
            ]


def first_column(table: str, value: str) -> bool:
    """Whether a row of a CLI table begins with ``value``."""
    return any(line.split()[:1] == [value] for line in table.splitlines())


async def run(
    api: Running, token: str, *argv: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    return await run_cli(api.url, *argv, "--token", token, capsys=capsys)


async def test_the_cli_shows_each_tenant_what_it_may_see(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_SUPERVISOR_TOKEN", raising=False)
    async with admin_running(config(), tmp_path) as api:
        with trio.fail_after(60):
            await wait_for(api.http(ALICE), "/v1/servers/mini", lambda d: d["state"] == "steady")
            for token, sees in ((ALICE, False), (BOB, True)):
                status, out, _ = await run(api, token, "tools", "--wide", capsys=capsys)
                assert (
                    status == 0 and first_column(out, "mini_echo") and first_column(out, "mini_add") is sees
                )
                status, out, _ = await run(api, token, "resources", capsys=capsys)
                assert status == 0 and ("mini://notes" in out) is sees
                status, out, _ = await run(api, token, "prompts", capsys=capsys)
                assert status == 0 and ("mini_greet" in out) is sees
                status, out, _ = await run(api, token, "search", "add", "two", "numbers", capsys=capsys)
                assert status == 0 and first_column(out, "mini_add") is sees
                status, out, err = await run(api, token, "call", "mini_add", json.dumps(ADD), capsys=capsys)
                assert (status, out) == ((0, "3\n") if sees else (1, "")), err
                assert sees or err.startswith("error unknown_tool: unknown tool mini_add")
                status, out, err = await run(api, token, "read", "mini://notes", capsys=capsys)
                assert (status, out) == ((0, "mini notes\n") if sees else (1, "")), err
                assert sees or err.startswith("error unknown_resource: unknown resource mini://notes")
                status, out, _ = await run(
                    api, token, "--json", "call", "mini_echo", '{"text": "x"}', capsys=capsys
                )
                assert status == 0 and json.loads(out)["ok"]
                status, out, _ = await run(
                    api, token, "--json", "call", "mini_echo", '{"text": "x"}', capsys=capsys
                )
                assert status != 0
                assert_rate_limited(json.loads(out))


def names(answer: dict[str, Any], kind: str, key: str) -> list[str]:
    return [item[key] for item in answer["result"][kind]]


async def new_era(
    http: Http, request_id: int, method: str, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One 2026-07-28 request, with the headers that repeat its method and what it names."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    named = (params or {}).get("name", (params or {}).get("uri"))
    if named is not None:
        headers["Mcp-Name"] = named
    reply = await http.request("POST", "/mcp", json=request(request_id, method, params), headers=headers)
    assert reply.status in (200, 400), reply
    answer: dict[str, Any] = reply.json()
    return answer


async def test_mcp_in_both_eras_hides_from_one_tenant_what_another_sees(tmp_path: Path) -> None:
    async with admin_running(config(), tmp_path) as api:
        with trio.fail_after(40):
            for token, sees in ((ALICE, False), (BOB, True)):
                mcp = McpHttp(api.http(token))
                await mcp.open()
                old = (
                    await mcp.call(1, "tools/list"),
                    await mcp.call(2, "resources/list"),
                    await mcp.call(3, "prompts/list"),
                )
                http = api.http(token)
                new = (
                    await new_era(http, 1, "tools/list"),
                    await new_era(http, 2, "resources/list"),
                    await new_era(http, 3, "prompts/list"),
                )
                for tools, resources, prompts in (old, new):
                    assert "mini_echo" in names(tools, "tools", "name")
                    assert ("mini_add" in names(tools, "tools", "name")) is sees
                    assert names(resources, "resources", "uri") == (["mini://notes"] if sees else [])
                    assert names(prompts, "prompts", "name") == (["mini_greet"] if sees else [])

                call = {"name": "mini_add", "arguments": ADD}
                read = {"uri": "mini://notes"}
                get = {"name": "mini_greet", "arguments": {"who": "Ada"}}
                answers = [
                    (
                        await mcp.call(4, "tools/call", call),
                        await mcp.call(5, "resources/read", read),
                        await mcp.call(6, "prompts/get", get),
                    ),
                    (
                        await new_era(http, 4, "tools/call", call),
                        await new_era(http, 5, "resources/read", read),
                        await new_era(http, 6, "prompts/get", get),
                    ),
                ]
                # a URI nobody lists: -32002 in the handshake era, -32602 naming it in the new one
                for (added, notes, greeting), missing in zip(
                    answers, (RESOURCE_NOT_FOUND, INVALID_PARAMS), strict=True
                ):
                    if sees:
                        assert added["result"]["content"] == [{"type": "text", "text": "3"}]
                        assert notes["result"]["contents"][0]["text"] == "mini notes"
                        assert greeting["result"]["messages"][0]["content"]["text"] == "Hello, Ada"
                    else:
                        assert added["error"]["code"] == INVALID_PARAMS
                        assert "unknown tool mini_add" in added["error"]["message"]
                        assert notes["error"]["code"] == missing
                        assert notes["error"]["data"]["code"] == "unknown_resource"
                        assert greeting["error"]["code"] == INVALID_PARAMS
                        assert greeting["error"]["data"] == {"code": "unknown_prompt"}

                echo = {"name": "mini_echo", "arguments": {"text": "x"}}
                first = await mcp.call(7, "tools/call", echo)
                assert first["result"]["isError"] is False
                for limited in (
                    await mcp.call(8, "tools/call", echo),
                    await new_era(http, 8, "tools/call", echo),
                ):
                    assert limited["result"]["isError"] is True
                    detail = limited["result"]["_meta"][ERROR_META]
                    assert detail["code"] == "rate_limited" and detail["retry_after_ms"] > 0


MINI = str(SERVERS / "mini_server.py")


async def test_the_stdio_front_hides_what_its_tenant_may_not_see(tmp_path: Path) -> None:
    """The stdio front runs as the tenant ``default``: lists for ``default`` hide from it,
    lists for another tenant do not."""
    piped = (
        INITIALIZE
        + rpc(2, "tools/list")
        + rpc(3, "resources/list")
        + rpc(4, "prompts/list")
        + rpc(5, "tools/call", {"name": "mini_add", "arguments": ADD})
        + rpc(6, "resources/read", {"uri": "mini://notes"})
        + rpc(7, "prompts/get", {"name": "mini_greet", "arguments": {"who": "Ada"}})
        + rpc(8, "tools/call", {"name": "mini_echo", "arguments": {"text": "a"}})
        + rpc(9, "tools/call", {"name": "mini_echo", "arguments": {"text": "b"}})
    )
    exposure = {
        "server": "mini",
        "tools": {"deny": ["add"]},
        "resources": {"deny": ["mini://*"]},
        "prompts": {"deny": ["gr*"]},
    }
    for tenant, sees in (("default", False), ("alice", True)):
        path = tmp_path / f"{tenant}.json"
        path.write_text(
            json.dumps(
                {
                    "servers": {
                        "mini": {"command": sys.executable, "args": [MINI, "--surface"], "trusted": True}
                    },
                    "exposure": [{"tenant": tenant, **exposure}],
                    "limits": [{"tenant": "default", "tool": "echo", "per_s": 0.001, "burst": 1}],
                }
            )
        )
        command = [str(CLI), "stdio", "--config", str(path), "--state-dir", str(tmp_path / "state")]
        with trio.fail_after(20):
            done = await trio.run_process(command, stdin=piped, capture_stdout=True, capture_stderr=True)
        answers = {answer["id"]: answer for answer in map(json.loads, done.stdout.splitlines())}
        assert sorted(answers) == list(range(1, 10)), done.stdout
        assert ("mini_add" in names(answers[2], "tools", "name")) is sees
        assert names(answers[3], "resources", "uri") == (["mini://notes"] if sees else [])
        assert names(answers[4], "prompts", "name") == (["mini_greet"] if sees else [])
        if sees:
            assert answers[5]["result"]["content"] == [{"type": "text", "text": "3"}]
            assert answers[6]["result"]["contents"][0]["text"] == "mini notes"
            assert answers[7]["result"]["messages"][0]["content"]["text"] == "Hello, Ada"
        else:
            assert answers[5]["error"]["code"] == INVALID_PARAMS
            assert answers[6]["error"]["data"] == {"code": "unknown_resource"}
            assert answers[7]["error"]["data"] == {"code": "unknown_prompt"}
        echoes = [answers[8]["result"], answers[9]["result"]]
        assert sorted(e["isError"] for e in echoes) == [False, True]  # concurrent: either may be first
        [limited] = [e for e in echoes if e["isError"]]
        assert limited["_meta"][ERROR_META]["code"] == "rate_limited"
        assert limited["_meta"][ERROR_META]["retry_after_ms"] > 0
