"""Remembered "always" answers through the admin API: a tenant lists and revokes its
own (another tenant's is a 404, as for every object of another tenant), an operator
sees and revokes every tenant's; a revoked answer is asked again at the tool's next call."""

from __future__ import annotations

from pathlib import Path

from actors.router.trust import Action
from supervisor.settings.model import TokenGrant
from supervisor.web.roles import Role
from tests.support.admin import ALICE, BOB, TOKENS, admin_running, config_of, mini_spec

OPERATOR = "operator-token-0123456789"
ECHO = "mcp:mini:echo"


async def test_tenants_list_and_revoke_their_own_the_operator_everyones(tmp_path: Path) -> None:
    tokens = {**TOKENS, OPERATOR: TokenGrant("ops", Role.OPERATOR)}
    async with admin_running(config_of(mini_spec("mini"), tokens=tokens), tmp_path) as api:
        policy = api.sup.policy
        policy.mirror_always("alice", ECHO, "f" * 64, Action.ALLOW.value)
        policy.mirror_always("bob", ECHO, "f" * 64, Action.DENY.value)
        policy.mirror_always("bob", "mcp:mini:add", "f" * 64, Action.ALLOW.value)
        alice, bob, ops = api.http(ALICE), api.http(BOB), api.http(OPERATOR)

        mine = (await alice.request("GET", "/v1/approvals/remembered")).json()
        assert mine == {"remembered": [{"tenant": "alice", "permission": ECHO, "decision": "allow"}]}
        every = (await ops.request("GET", "/v1/approvals/remembered")).json()["remembered"]
        assert [(item["tenant"], item["permission"]) for item in every] == [
            ("alice", ECHO), ("bob", "mcp:mini:add"), ("bob", ECHO)
        ]  # fmt: skip

        foreign = await alice.request("DELETE", f"/v1/approvals/remembered?permission={ECHO}&tenant=bob")
        assert foreign.status == 404  # another tenant's: as if absent
        missing = await alice.request("DELETE", "/v1/approvals/remembered?permission=mcp:mini:add")
        assert missing.status == 404 and missing.json()["error"]["message"].startswith("no remembered")
        bare = await alice.request("DELETE", "/v1/approvals/remembered")
        assert bare.status == 400 and "?permission=" in bare.json()["error"]["message"]

        assert (await alice.request("DELETE", f"/v1/approvals/remembered?permission={ECHO}")).status == 204
        bobs = f"/v1/approvals/remembered?permission={ECHO}&tenant=bob"
        assert (await ops.request("DELETE", bobs)).status == 204
        assert policy.remembered(None) == [("bob", "mcp:mini:add", "allow")]
        assert (await bob.request("GET", "/v1/approvals/remembered")).json()["remembered"] == [
            {"tenant": "bob", "permission": "mcp:mini:add", "decision": "allow"}
        ]
