"""``GET /v1/gateway/sessions`` lists the 2026-07-28 era's per-tenant state beside the
handshake-era sessions: one row per tenant (``era: "2026-07-28"``) with what its
requests share (activations, "for the session" approvals, calls in flight and parked,
how long unused), a tenant seeing only its own, the operator every tenant's, a bridge
peer none; the
handshake-era rows as they were. Over the real server, every answer checked against
the OpenAPI document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import trio

from actors.protocol.messages import META_CLIENT_INFO
from supervisor.settings.model import Role, TokenGrant, TrustRule, TrustSettings
from tests.gateway.test_gateway_stateless import VERSION, request
from tests.support.admin import ALICE, BOB, Http, Reply, admin_running, config_of, conforms, mini_spec
from tests.support.gateway_http import McpHttp

OPS, PEER = "ops-listing-token-0123456789", "peer-listing-token-0123456789"
TOKENS = {
    OPS: TokenGrant("ops", Role.OPERATOR),
    ALICE: "alice",
    BOB: "bob",
    PEER: TokenGrant("edge", Role.PEER),
}
MANY = "25"
"""mini_server's extra tools: past tool_search's threshold, so activations mean something."""


async def new_era(
    http: Http, n: int, method: str, params: dict[str, Any] | None = None, *, client: str | None = None
) -> Reply:
    """One 2026-07-28 request (no session), with the era's headers (``client``: the
    clientInfo name it gives)."""
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION}
    headers["Mcp-Method"] = method
    if params is not None and "name" in params:
        headers["Mcp-Name"] = params["name"]
    message = request(n, method, params)
    if client is not None:
        message["params"]["_meta"][META_CLIENT_INFO] = {"name": client, "version": "1"}
    return await http.request("POST", "/mcp", json=message, headers=headers)


async def listed(http: Http) -> list[dict[str, Any]]:
    reply = await http.request("GET", "/v1/gateway/sessions")
    conforms("list_gateway_sessions", reply)
    rows: list[dict[str, Any]] = reply.json()["sessions"]
    return rows


async def test_new_era_tenant_state_is_listed_per_tenant_beside_handshake_sessions(tmp_path: Path) -> None:
    trust = TrustSettings(rules=(TrustRule("mcp:mini:add", action="ask"),), approval_timeout_s=30)
    config = attrs.evolve(config_of(mini_spec("mini", "--tools", MANY), tokens=TOKENS), trust=trust)
    async with admin_running(config, tmp_path) as api:
        alice, bob, ops = api.http(ALICE), api.http(BOB), api.http(OPS)
        with trio.fail_after(30):
            handshake = McpHttp(api.http(ALICE))
            await handshake.open()
            [before] = await listed(alice)  # the handshake-era row, as it always was
            assert set(before) == {
                "session_id", "era", "protocol_version", "client", "tenant", "age_s", "turns",
                "in_flight", "servers",
            }  # fmt: skip
            assert before["era"] == "handshake" and before["session_id"] == handshake.session_id

            echoed = await new_era(alice, 1, "tools/call", {"name": "mini_echo", "arguments": {"text": "a"}})
            assert echoed.status == 200, echoed
            async with trio.open_nursery() as nursery:
                added: list[Reply] = []

                async def add() -> None:
                    params = {"name": "mini_add", "arguments": {"a": 2, "b": 3}}
                    added.append(await new_era(alice, 2, "tools/call", params))

                nursery.start_soon(add)
                while not (pending := (await ops.request("GET", "/v1/approvals")).json()["approvals"]):  # noqa: ASYNC110 - the API's own list
                    await trio.sleep(0.02)
                [waiting] = [row for row in await listed(alice) if row["era"] == VERSION]
                assert waiting["in_flight"] == 1 and waiting["parked"] == 1 and waiting["idle_s"] == 0
                answer = {"decision": "allow", "remember": "session"}
                answered = await ops.request("POST", f"/v1/approvals/{pending[0]['id']}", json=answer)
                assert answered.status == 204, answered
            assert added[0].status == 200 and "5" in added[0].body.decode(), added[0]
            assert (await new_era(bob, 3, "tools/list", {})).status == 200

            handshake_row, state = await listed(alice)  # handshake-era rows first
            assert handshake_row == {**before, "age_s": handshake_row["age_s"]}
            assert state["era"] == VERSION and state["tenant"] == "alice" and "person" not in state
            assert state["session_id"] != handshake.session_id and state["protocol_version"] == VERSION
            assert state["client"] == {"name": "test-client", "version": "1"}
            assert state["activated"] == ["mini_echo", "mini_add"]  # by calls by name, in order
            assert state["approvals"] == [{"permission": "mcp:mini:add", "decision": "allow"}]
            assert (state["in_flight"], state["parked"], state["turns"]) == (0, 0, 1)  # it never listed
            assert state["idle_s"] >= 0 and state["age_s"] >= state["idle_s"] and "mini" in state["servers"]

            [bobs] = await listed(bob)  # a tenant sees only its own
            assert (bobs["tenant"], bobs["era"], bobs["activated"]) == ("bob", VERSION, [])
            every = await listed(ops)  # the operator every tenant's
            assert sorted((row["tenant"], row["era"]) for row in every) == [
                ("alice", VERSION), ("alice", "handshake"), ("bob", VERSION),
            ]  # fmt: skip
            refused = await api.http(PEER).request("GET", "/v1/gateway/sessions")  # a bridge peer: none
            assert refused.status == 403 and refused.json()["error"]["roles"] == ["operator", "tenant"]
