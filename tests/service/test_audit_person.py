"""Who a caller is, on its audit rows, call events and approvals, for each way in that
has a person today (``docs/identity.md``, "Who a caller is"): an embedding
session says, else its tenant; a static-token caller of the admin API or ``/mcp`` is
its tenant. (The stdio front's rows, the local user's, are in ``tests/cli/test_audit_cli.py``.)"""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from supervisor import Supervisor
from supervisor.gateway.stdio_front import local_user
from supervisor.sessions.approvals import Approval, ApprovalRequest
from supervisor.settings.model import TrustRule, TrustSettings
from supervisor.store import AuditRow
from tests.support.admin import ALICE, TOKENS, admin_running, config_of, conforms, mini_spec, wait_for
from tests.support.gateway_http import McpHttp


async def rows_of(sup: Supervisor, tool: str) -> list[AuditRow]:
    await sup.store.flush()
    rows = await sup.store.read(lambda s: s.audit_rows(limit=100))
    return [row for row in rows if row.tool == tool]


async def test_an_embedding_session_is_its_tenant_unless_the_host_says_who(tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval("allow")

    asking = TrustSettings(rules=(TrustRule("mcp:ask:*", action="ask"),))
    config = attrs.evolve(config_of(mini_spec("mini"), mini_spec("ask")), trust=asking)
    async with Supervisor.open(config, state_dir=tmp_path, approver=approver) as sup:
        with sup.events.subscribe() as sub, trio.fail_after(15):
            async with sup.session(tenant="acme") as plain, sup.session(tenant="acme", person="ada") as ada:
                assert (await (await plain.begin_turn()).call("mini_echo", {"text": "x"})).ok
                assert (await (await ada.begin_turn()).call("mini_echo", {"text": "y"})).ok
                assert (await (await ada.begin_turn()).call("ask_echo", {"text": "z"})).ok
            events: list[dict[str, Any]] = []
            while len([e for e in events if e["type"] == "call"]) < 3:
                events.append(dict(await sub.events.receive()))
        rows = await rows_of(sup, "mini_echo")
    assert sorted((row.tenant, row.person) for row in rows) == [("acme", "acme"), ("acme", "ada")]
    calls = [e for e in events if e["type"] == "call"]
    # The person is in an event only where it is news: a tenant's own name is left out.
    assert [e.get("person") for e in calls if e["session"] == plain.id] == [None]
    assert [e.get("person") for e in calls if e["session"] == ada.id] == ["ada", "ada"]
    assert [request.person for request in asked] == ["ada"]


async def test_a_static_token_caller_is_its_tenant_on_the_admin_api_and_mcp(tmp_path: Path) -> None:
    asking = TrustSettings(rules=(TrustRule("mcp:ask:*", action="ask"),))
    config = attrs.evolve(config_of(mini_spec("mini"), mini_spec("ask"), tokens=TOKENS), trust=asking)
    async with admin_running(config, tmp_path) as api:
        http = api.http(ALICE)
        with trio.fail_after(15):
            sid = await http.session()
            tid = (await http.turn(sid))["turn_id"]
            assert (await http.call(sid, tid, "mini_add", {"a": 1, "b": 2})).status == 200
            mcp = McpHttp(api.http(ALICE))
            await mcp.open()
            await mcp.call(1, "tools/call", {"name": "mini_echo", "arguments": {"text": "a"}})
        rows = [*await rows_of(api.sup, "mini_add"), *await rows_of(api.sup, "mini_echo")]
    assert [(row.tool, row.tenant, row.person) for row in rows] == [
        ("mini_add", "alice", "alice"),
        ("mini_echo", "alice", "alice"),
    ]


async def test_a_pending_approval_shows_a_person_who_is_not_the_tenant(tmp_path: Path) -> None:
    """``/v1/approvals`` and the approval events: an embedding session's person is
    there; a static-token caller's (its tenant) is left out, as before."""
    asking = TrustSettings(rules=(TrustRule("mcp:ask:*", action="ask"),))
    config = attrs.evolve(config_of(mini_spec("ask")), trust=asking)
    async with admin_running(config, tmp_path) as api, api.sup.session(person="ada") as session:
        http = api.http()
        with api.sup.events.subscribe() as sub, trio.fail_after(15):
            async with trio.open_nursery() as nursery:
                turn = await session.begin_turn()
                nursery.start_soon(turn.call, "ask_echo", {"text": "z"})
                pending = await wait_for(http, "/v1/approvals", lambda body: body["approvals"])
                [item] = pending["approvals"]
                assert item["tenant"] == "default" and item["person"] == "ada"
                conforms("list_approvals", await http.request("GET", "/v1/approvals"))  # as documented
                answer = {"decision": "allow"}
                assert (await http.request("POST", f"/v1/approvals/{item['id']}", json=answer)).status < 300
            while (event := await sub.events.receive())["type"] != "approval":
                pass
    assert event["person"] == "ada" and event["status"] == "pending"


async def test_an_empty_person_is_refused_naming_the_fix(tmp_path: Path) -> None:
    async with Supervisor.open(config_of(), state_dir=tmp_path) as sup:
        for bad in ("", "  "):
            with pytest.raises(ValueError, match=r"person must be a non-empty str .* leave it out"):
                async with sup.session(person=bad):
                    pass


def test_the_stdio_fronts_person_is_the_local_user_or_its_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    assert local_user() == getpass.getuser()

    def nobody() -> str:
        raise OSError("No username set in the environment")

    monkeypatch.setattr(getpass, "getuser", nobody)
    assert local_user() == f"uid:{os.getuid()}"
