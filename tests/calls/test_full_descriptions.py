"""The full description of an untrusted tool is reachable: listings cut it (what the
model sees every turn stays bounded), ``tool_search`` results carry all of it, and so
does ``GET /v1/tools?full=1``, for the operator role only. Over the real admin API."""

from __future__ import annotations

from pathlib import Path

import attrs
import trio

from supervisor.settings.model import Role, TokenGrant, TrustSettings
from tests.support.admin import ALICE, admin_running, config_of, conforms, mini_spec, wait_for

OPS = "ops-token-0123456789abc"
FULL = "Echo the given text back."  # mini_echo's description, 25 characters
CUT = "Echo the…"  # cut to 10 for an untrusted server


async def test_search_and_full_listing_carry_the_whole_description(tmp_path: Path) -> None:
    config = config_of(
        mini_spec("mini", trusted=False), tokens={OPS: TokenGrant("ops", Role.OPERATOR), ALICE: "alice"}
    )
    config = attrs.evolve(config, trust=TrustSettings(max_description_length=10))
    async with admin_running(config, tmp_path) as api:
        alice, ops = api.http(ALICE), api.http(OPS)
        with trio.fail_after(20):
            await wait_for(alice, "/v1/servers/mini", lambda d: d["state"] == "steady")

            def described(reply_json: dict[str, list[dict[str, str]]], key: str) -> str:
                return next(t["description"] for t in reply_json[key] if t["id"] == "mini_echo")

            for who in (alice, ops):
                listed = await who.request("GET", "/v1/tools")
                conforms("list_tools", listed)
                assert described(listed.json(), "tools") == CUT
                assert described((await who.request("GET", "/v1/tools?full=0")).json(), "tools") == CUT

            full = await ops.request("GET", "/v1/tools?full=1")
            conforms("list_tools", full)
            assert described(full.json(), "tools") == FULL

            refused = await alice.request("GET", "/v1/tools?full=1")
            assert refused.status == 403 and refused.json() == {
                "error": {
                    "code": "forbidden",
                    "message": "list_tools with full=1 needs the operator role; "
                    "this token has the tenant role",
                    "roles": ["operator"],
                }
            }
            bad = await ops.request("GET", "/v1/tools?full=yes")
            assert bad.status == 400 and bad.json()["error"]["code"] == "bad_request"
            assert "query parameter full" in bad.json()["error"]["message"]

            # A tenant's turn lists the cut text; its search brings the whole of it.
            sid = await alice.session()
            turn = await alice.turn(sid)
            assert described(turn, "tools") == CUT
            found = await alice.request(
                "POST", f"/v1/sessions/{sid}/tool_search", json={"query": "echo text"}
            )
            conforms("tool_search", found)
            assert described(found.json(), "matches") == FULL
