"""Roles and tenants of the admin API, through the real Hypercorn-served app.

``EXPECTED`` below is this file's own statement of who may call what, written by
hand rather than derived from ``openapi.ROUTES``: every route the app serves must be
in it (a new route without a role entry fails here), the route table must agree with
it, and every role is sent against every endpoint on the wire. Then the operator's
view of every tenant, the CLI clients in each role, and request ids, which are per
tenant: two tenants may use one id at the same time, and a tenant learns nothing (no
409, no cancel) about the ids of another.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.spec import ServerSpec
from supervisor.admin.app import create_app
from supervisor.admin.hosted import HostedSessions
from supervisor.admin.openapi import document
from supervisor.calls.requests import RequestRegistry
from supervisor.cli import main as cli
from supervisor.cli.auth_login import _tell_service
from supervisor.server.apps import compose, served
from supervisor.service import Supervisor
from supervisor.settings.model import Config, Role, TokenGrant
from supervisor.web.guard import ROUTE_ACTIONS
from supervisor.web.roles import Action, Principal, allowed_roles, authorize, denial_message
from supervisor.web.routes import ROUTES
from tests.support.admin import (
    ALICE,
    BOB,
    admin_in_thread,
    admin_running,
    config_of,
    conforms,
    mini_spec,
    path_of,
    until,
    wait_for,
)

OPS, PEER = "ops-token-0123456789abc", "peer-token-0123456789"
ROLE_TOKENS: dict[str, TokenGrant | str] = {
    OPS: TokenGrant("ops", Role.OPERATOR),
    ALICE: "alice",
    BOB: "bob",
    PEER: TokenGrant("bridge", Role.PEER),
}
TOKEN_OF = {Role.OPERATOR: OPS, Role.TENANT: ALICE, Role.PEER: PEER}

OPERATOR, TENANT, PEER_ROLE = Role.OPERATOR, Role.TENANT, Role.PEER
EVERYONE = {OPERATOR, TENANT, PEER_ROLE}
CLIENTS = {OPERATOR, TENANT}
EXPECTED: dict[str, set[Role]] = {
    "health": EVERYONE,
    "ready": EVERYONE,  # a load balancer's health check has no token
    "protected_resource": EVERYONE,
    "protected_resource_mcp": EVERYONE,
    "protected_resource_v1": EVERYONE,
    "oauth_callback": EVERYONE,  # the one-time state of a sign-in is its authentication
    "metrics": {OPERATOR},
    "openapi": CLIENTS,
    "events": CLIENTS,
    "list_servers": CLIENTS,
    "list_replicas": CLIENTS,
    "get_server": CLIENTS,
    "restart_server": {OPERATOR},
    "enable_server": {OPERATOR},
    "disable_server": {OPERATOR},
    "reload_config": {OPERATOR},
    "list_tools": CLIENTS,
    "list_sessions": CLIENTS,
    "create_session": CLIENTS,
    "mcp_post": CLIENTS,
    "mcp_get": CLIENTS,
    "mcp_delete": CLIENTS,
    "list_gateway_sessions": CLIENTS,
    "bridge": CLIENTS,
    "list_bridge_sessions": CLIENTS,
    "list_bridge_peers": CLIENTS,
    "delete_session": CLIENTS,
    "begin_turn": CLIENTS,
    "call_tool": CLIENTS,
    "tool_search": CLIENTS,
    "list_approvals": CLIENTS,
    "list_remembered": CLIENTS,
    "forget_remembered": CLIENTS,
    "answer_approval": CLIENTS,
    "cancel_request": CLIENTS,
    "list_calls": CLIENTS,
    "cancel_call": CLIENTS,
    "search_audit": CLIENTS,
    "server_latency": CLIENTS,
    "list_resources": CLIENTS,
    "read_resource": CLIENTS,
    "list_prompts": CLIENTS,
    "get_prompt": CLIENTS,
    "complete": CLIENTS,
    "subscribe": CLIENTS,
    "unsubscribe": CLIENTS,
}
DUMMY_IDS = {"sid": "s", "tid": "t", "approval_id": "a", "rid": "r", "name": "nope", "call_id": "c0"}


def _config(*specs: ServerSpec) -> Config:
    return config_of(*specs, tokens=ROLE_TOKENS)


# ------------------------------------------------------------------ the table


async def test_every_served_route_has_a_role_entry(tmp_path: Path) -> None:
    async with Supervisor.open(config_of(), state_dir=tmp_path) as sup:
        endpoints = set(served(compose(sup, bind_is_loopback=True)).values())
    assert endpoints == set(EXPECTED), "a route without a role entry here, or one no longer served"
    for endpoint in endpoints:
        assert endpoint in ROUTE_ACTIONS, endpoint
        assert set(allowed_roles(ROUTE_ACTIONS[endpoint])) == EXPECTED[endpoint], endpoint


async def test_a_route_added_without_a_role_entry_is_refused_to_everyone(tmp_path: Path) -> None:
    async with Supervisor.open(config_of(), state_dir=tmp_path) as sup:
        app = create_app(sup, HostedSessions(sup), bind_is_loopback=True)

        async def extra() -> dict[str, int]:
            return {"served": 1}

        app.add_url_rule("/v1/extra", "extra", view_func=extra, methods=["GET"])
        # No tokens, loopback: the operator, who may do anything a route table allows.
        reply = await app.test_client().get("/v1/extra", headers={"Host": "127.0.0.1"})
        assert reply.status_code == 403
        assert await reply.get_json() == {
            "error": {"code": "forbidden", "message": "extra is not open to any role", "roles": []}
        }
        assert (await app.test_client().get("/v1/servers", headers={"Host": "127.0.0.1"})).status_code == 200


def test_authorize_is_the_grant_table() -> None:
    ops, alice, peer = Principal("ops", OPERATOR), Principal("alice", TENANT), Principal("b", PEER_ROLE)
    assert authorize(ops, Action.CONTROL_SERVERS) and not authorize(alice, Action.CONTROL_SERVERS)
    assert authorize(peer, Action.BRIDGE) and not authorize(ops, Action.BRIDGE)
    assert not authorize(peer, Action.READ_STATE) and authorize(peer, Action.PUBLIC)
    assert not any(authorize(p, None) for p in (ops, alice, peer))  # an unknown action: nobody
    assert (ops.scope, alice.scope, peer.scope) == (None, "alice", "b")
    assert denial_message(alice, Action.CONTROL_SERVERS, "restart_server") == (
        "restart_server needs the operator role; this token has the tenant role"
    )
    assert denial_message(peer, Action.READ_STATE, "list_tools") == (
        "list_tools needs the operator or tenant role; this token has the peer role"
    )


def test_the_document_lists_the_roles_of_each_operation() -> None:
    doc = document()
    assert "operator" in doc["info"]["description"] and "peer" in doc["info"]["description"]
    for route in ROUTES:
        operation = doc["paths"][route.path][route.method.lower()]
        assert set(operation["x-roles"]) == {role.value for role in EXPECTED[route.operation]}
        assert "403" in operation["responses"]


# --------------------------------------------------------------- on the wire


@pytest.mark.parametrize("role", list(Role), ids=[r.value for r in Role])
async def test_each_role_against_each_endpoint(tmp_path: Path, role: Role) -> None:
    async with admin_running(_config(mini_spec("mini")), tmp_path) as api:
        http = api.http(TOKEN_OF[role])
        with trio.fail_after(20):
            for route in ROUTES:
                if route.websocket:  # its gate runs at the upgrade: tests/bridge/test_bridge_auth.py
                    continue
                path = path_of(route.operation, **DUMMY_IDS)
                body = {"tool": "mini_echo", "query": "x", "decision": "deny"}
                allowed = role in EXPECTED[route.operation]
                if route.operation == "events" and allowed:
                    reply = await http.request("HEAD", path)  # the stream itself never ends
                else:
                    reply = await http.request(route.method, path, json=body)
                if allowed:
                    assert reply.status not in (401, 403), (route.operation, reply)
                    # no_config_file: these supervisors run a config built in the test
                    if route.path == "/mcp":  # no session here: refused, saying why, as JSON-RPC
                        assert reply.status == 400 and reply.json()["error"]["message"], reply
                        continue
                    if route.operation == "oauth_callback":  # no sign-in waits: a page for a browser
                        assert reply.status == 400 and reply.headers["content-type"].startswith("text/html")
                        continue
                    if route.operation == "forget_remembered":  # no ?permission=: a 400 saying so
                        assert reply.status == 400 and "permission" in reply.json()["error"]["message"]
                        continue
                    assert reply.status < 300 or reply.json()["error"]["code"] in (
                        "not_found",
                        "no_config_file",
                    )
                else:
                    assert reply.status == 403, (route.operation, reply)
                    error = reply.json()["error"]
                    if route.path == "/mcp":  # a JSON-RPC error object: the details in data
                        error = {**error, **error["data"]}
                    expected = sorted(r.value for r in EXPECTED[route.operation])
                    assert error["code"] == "forbidden" and sorted(error["roles"]) == expected
                    assert f"this token has the {role.value} role" in error["message"]
                if route.operation != "events" or not allowed:
                    conforms(route.operation, reply)


async def test_without_tokens_a_loopback_client_is_the_operator(tmp_path: Path) -> None:
    async with admin_running(config_of(mini_spec("mini")), tmp_path) as api:
        http = api.http()
        with trio.fail_after(20):
            await wait_for(http, "/v1/servers/mini", lambda d: d["state"] == "steady")
            assert (await http.request("GET", "/metrics")).status == 200
            assert (await http.request("POST", "/v1/servers/mini/restart")).status == 202
            sid = await http.session()
            listed = (await http.request("GET", "/v1/sessions")).json()
            item = {"session_id": sid, "tenant": "default", "host_tools": 0, "pinned": []}
            assert listed == {"sessions": [item]}


async def test_a_tenant_cannot_control_shared_servers(tmp_path: Path) -> None:
    async with admin_running(_config(mini_spec("mini")), tmp_path) as api:
        alice, ops = api.http(ALICE), api.http(OPS)
        with trio.fail_after(20):
            await wait_for(alice, "/v1/servers/mini", lambda d: d["state"] == "steady")
            for command in ("restart", "disable", "enable"):
                reply = await alice.request("POST", f"/v1/servers/mini/{command}")
                message = f"{command}_server needs the operator role; this token has the tenant role"
                assert reply.status == 403 and reply.json() == {
                    "error": {"code": "forbidden", "message": message, "roles": ["operator"]}
                }
            assert (await alice.request("GET", "/v1/servers/mini")).json()["state"] == "steady"
            assert (await ops.request("POST", "/v1/servers/mini/disable")).status == 202
            await wait_for(alice, "/v1/servers/mini", lambda d: d["state"] == "disabled")
            assert (await ops.request("POST", "/v1/servers/mini/enable")).status == 202
            await wait_for(alice, "/v1/servers/mini", lambda d: d["state"] == "steady")


def test_request_ids_are_scoped_per_tenant() -> None:
    registry = RequestRegistry()
    alice = registry.open("r-1", "alice", "mini_sleep")
    bob = registry.open("r-1", "bob", "mini_sleep")
    assert len(registry) == 2
    assert registry.cancel("r-1", "bob") and bob.cancelled and not alice.cancelled
    registry.close("r-1", "bob")
    assert not registry.cancel("r-1", "bob")
    assert registry.cancel("r-1", None) and alice.cancelled  # None: every tenant's
    registry.close("r-1", "alice")
    assert len(registry) == 0


async def test_two_tenants_may_use_one_request_id_at_once(tmp_path: Path) -> None:
    calls_log = tmp_path / "calls.log"
    config = _config(mini_spec("mini", "--calls-log", str(calls_log)))
    async with admin_running(config, tmp_path / "state") as api:
        alice, bob, ops = api.http(ALICE), api.http(BOB), api.http(OPS)
        with trio.fail_after(20):
            sid, bob_sid = await alice.session(), await bob.session()
            tid, bob_tid = (await alice.turn(sid))["turn_id"], (await bob.turn(bob_sid))["turn_id"]
            slow: list[Any] = []

            async def alice_sleeps() -> None:
                slow.append(await alice.call(sid, tid, "mini_sleep", {"seconds": 30}, request_id="same-1"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(alice_sleeps)
                await until(calls_log.exists)  # Alice's call is at the server: in flight
                # Bob uses the same id: no 409 naming Alice's request, just his answer.
                echoed = await bob.call(bob_sid, bob_tid, "mini_echo", {"text": "b"}, request_id="same-1")
                assert echoed.status == 200 and echoed.json()["ok"] is True, echoed
                assert echoed.headers["x-request-id"] == "same-1"
                # Bob's cancel of that id reaches no call of Alice's; nor does the
                # operator's: it cancels its own tenant's requests only.
                assert (await bob.request("POST", "/v1/requests/same-1/cancel")).status == 404
                assert (await ops.request("POST", "/v1/requests/same-1/cancel")).status == 404
                assert not slow
                # Alice reusing her own id in flight is still a conflict.
                again = await alice.call(sid, tid, "mini_echo", {"text": "a"}, request_id="same-1")
                assert again.status == 409 and again.json()["error"]["code"] == "conflict"
                assert (await alice.request("POST", "/v1/requests/same-1/cancel")).status == 202
            assert slow[0].json()["error"]["code"] == "cancelled"
        assert len(api.sup.requests) == 0


# ------------------------------------------------------- every tenant's view


async def test_the_operator_sees_every_tenants_sessions_approvals_and_events(tmp_path: Path) -> None:
    calls_log = tmp_path / "calls.log"
    config = _config(mini_spec("mini", "--calls-log", str(calls_log)), mini_spec("wild", trusted=False))
    async with admin_running(config, tmp_path / "state") as api:
        ops, alice, bob = api.http(OPS), api.http(ALICE), api.http(BOB)
        with trio.fail_after(25):
            sid, bob_sid = await alice.session(), await bob.session(pinned=["mini_echo"])
            tid = (await alice.turn(sid))["turn_id"]

            def ids(reply: Any) -> dict[str, str]:
                return {item["session_id"]: item["tenant"] for item in reply.json()["sessions"]}

            listed = await ops.request("GET", "/v1/sessions")
            conforms("list_sessions", listed)
            assert ids(listed) == {sid: "alice", bob_sid: "bob"}
            assert ids(await alice.request("GET", "/v1/sessions")) == {sid: "alice"}
            assert (await bob.request("GET", "/v1/sessions")).json()["sessions"] == [
                {"session_id": bob_sid, "tenant": "bob", "host_tools": 0, "pinned": ["mini_echo"]}
            ]

            async with ops.stream("GET", "/v1/events") as events:
                assert (await events.next()) is not None  # hello
                answers: list[Any] = []

                async def write() -> None:
                    answers.append(await alice.call(sid, tid, "wild_add_tool", {"name": "x"}))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(write)
                    pending = await wait_for(ops, "/v1/approvals", lambda d: len(d["approvals"]) == 1)
                    item = pending["approvals"][0]
                    assert (item["tenant"], item["session"], item["tool"]) == ("alice", sid, "wild_add_tool")
                    conforms("list_approvals", await ops.request("GET", "/v1/approvals"))
                    assert (await bob.request("GET", "/v1/approvals")).json() == {"approvals": []}
                    answer = f"/v1/approvals/{item['id']}"
                    assert (await bob.request("POST", answer, json={"decision": "allow"})).status == 404
                    assert (await ops.request("POST", answer, json={"decision": "allow"})).status == 204
                assert answers[0].json()["ok"] is True
                seen = await events.until(lambda e: e.event == "call" and e.data["tool"] == "wild_add_tool")
            assert any(e.event == "approval" and e.data["tenant"] == "alice" for e in seen)
            assert seen[-1].data["tenant"] == "alice"

            # The operator sees and may close Alice's session, but does not work inside it.
            for method, path, body in (
                ("POST", f"/v1/sessions/{sid}/turns", None),
                ("POST", f"/v1/sessions/{sid}/turns/{tid}/calls", {"tool": "mini_echo"}),
                ("POST", f"/v1/sessions/{sid}/tool_search", {"query": "echo"}),
            ):
                reply = await ops.request(method, path, json=body)
                assert reply.status == 404 and reply.json()["error"]["code"] == "not_found", (path, reply)
            assert (await alice.request("DELETE", f"/v1/sessions/{bob_sid}")).status == 404
            assert (await ops.request("DELETE", f"/v1/sessions/{sid}")).status == 204
            assert (await alice.request("POST", f"/v1/sessions/{sid}/turns")).status == 404
            assert ids(await ops.request("GET", "/v1/sessions")) == {bob_sid: "bob"}


# ------------------------------------------------------------ the CLI clients


@pytest.mark.parametrize(
    ("role", "exit_status"), [(OPERATOR, 0), (TENANT, 0), (PEER_ROLE, 1)], ids=["operator", "tenant", "peer"]
)
def test_the_cli_clients_in_each_role(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], role: Role, exit_status: int
) -> None:
    with admin_in_thread(_config(mini_spec("mini")), tmp_path) as url:
        common = ["--url", url, "--token", TOKEN_OF[role], "--json"]
        for command in (["status"], ["tools"], ["search", "echo"], ["call", "mini_echo", '{"text": "hi"}']):
            assert cli.main([*command, *common]) == exit_status, (command, capsys.readouterr())
            out, err = capsys.readouterr()
            if exit_status == 0:
                assert json.loads(out) and not err
            else:
                assert "needs the operator or tenant role; this token has the peer role" in err, err
            assert TOKEN_OF[role] not in out + err


def test_auth_login_restarts_the_server_only_with_an_operator_token(tmp_path: Path) -> None:
    """``auth login`` writes the state directory itself (no role: file access is the
    gate); the restart it then asks a running service for is server control."""
    shown: list[str] = []
    with admin_in_thread(_config(mini_spec("mini")), tmp_path) as url:
        _tell_service("mini", url, ALICE, shown.append)
        _tell_service("mini", url, OPS, shown.append)
    assert shown[0].startswith(f"The supervisor at {url} did not restart mini (restart_server needs the")
    assert "operator role; this token has the tenant role (HTTP 403, forbidden)" in shown[0]
    assert shown[1] == f"Restarted mini in the supervisor at {url}."
    assert all(ALICE not in line and OPS not in line for line in shown)
