"""The console's sessions over the real server: the 2026-07-28 era's tenant states (in
the sessions table as kind ``gateway`` with their era, and what each holds in a section
of its own) and the bridge's dial-out peers (a real ``mcp-supervisor bridge`` process),
escaped, a tenant seeing only its own states; and ``/ui/fragments/approvals``, the
read-only piece the script fetches for a live approval's arguments: signed out
refused, allow-listed, scoped by the API exactly as ``GET /v1/approvals``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs
import trio

from supervisor.console.fragments import CALL_CELLS, FRAGMENTS, SERVER_CELLS
from supervisor.console.session_sections import session_sections
from supervisor.settings.model import Role, TokenGrant, TrustRule, TrustSettings
from tests.bridge.test_bridge_peers import PEER, peer_config, peer_running
from tests.console.test_console_http import OPS, TOKENS, sign_in
from tests.gateway.test_gateway_tenant_listing import MANY, new_era
from tests.support.admin import ALICE, BOB, Http, admin_running, config_of, conforms, mini_spec

ALL_TOKENS = {**TOKENS, BOB: "bob", PEER: TokenGrant("edge", Role.PEER)}
EVIL = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'


def table(page: str, ident: str) -> str:
    """The ``<table id=ident>`` of a page, whole."""
    found = re.search(rf'<table id="{ident}">.*?</table>', page, re.S)
    assert found is not None, ident
    return found.group(0)


async def page_of(http: Http, token: str) -> str:
    cookie, _ = await sign_in(http, token)
    answer = await http.request("GET", "/ui", headers={"Cookie": cookie})
    assert answer.status == 200, answer
    return answer.body.decode()


async def test_the_page_shows_new_era_tenant_states_and_bridge_peers(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini", "--tools", MANY), tokens=ALL_TOKENS)
    async with admin_running(config, tmp_path / "state") as api:
        http = Http(api.url)
        with trio.fail_after(40):
            echo = {"name": "mini_echo", "arguments": {"text": "a"}}
            assert (await new_era(api.http(ALICE), 1, "tools/call", echo, client=EVIL)).status == 200
            assert (await new_era(api.http(BOB), 2, "tools/list", {})).status == 200
            states = {
                row["tenant"]: row["session_id"]
                for row in (await api.http(OPS).request("GET", "/v1/gateway/sessions")).json()["sessions"]
            }
            async with peer_running(api, peer_config(tmp_path, "far-mini")):
                peers = await api.http(ALICE).request("GET", "/v1/bridge/peers")
                conforms("list_bridge_peers", peers)  # the document says what the listing holds
                [peer] = peers.json()["peers"]

                mine = await page_of(http, ALICE)
                sessions = table(mine, "sessions")
                assert re.search(
                    rf"<td>gateway</td><td>{states['alice']}</td><td>alice</td><td>2026-07-28</td>", sessions
                )
                held = table(mine, "tenant-states")
                assert f'data-tenant-state="{states["alice"]}"' in held and "<td>mini_echo</td>" in held
                assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in held  # its client, escaped
                assert "<script>window" not in mine and "<img" not in mine
                assert states["bob"] not in mine  # a tenant sees only its own
                listed = table(mine, "peers")
                assert (
                    f"<td>{peer['peer']}</td>" in listed and "far-mini (" in listed and "<td>0</td>" in listed
                )

                every = table(await page_of(http, OPS), "tenant-states")
                assert states["alice"] in every and states["bob"] in every  # the operator every tenant's


def test_the_sections_escape_every_value() -> None:
    item = {
        "era": "2026-07-28", "session_id": EVIL, "tenant": EVIL, "person": EVIL, "client": {"name": EVIL},
        "activated": [EVIL], "approvals": [{"permission": EVIL, "decision": EVIL}],
    }  # fmt: skip
    peer = {"peer": EVIL, "servers": [{"name": EVIL, "digest": EVIL}], "sessions": EVIL, "age_s": EVIL}
    shown = session_sections([item, {**item, "era": "handshake"}], [peer])
    assert "<script>" not in shown and "<img" not in shown and shown.count("&lt;script&gt;") >= 8
    assert shown.count("<tr data-tenant-state=") == 1  # handshake-era rows have no state to show


async def test_approval_arguments_fragment(tmp_path: Path) -> None:
    config = config_of(mini_spec("mini"), tokens=ALL_TOKENS)
    trust = TrustSettings(rules=(TrustRule("mcp:mini:echo", action="ask"),), approval_timeout_s=30)
    async with admin_running(attrs.evolve(config, trust=trust), tmp_path / "state") as api:
        http = Http(api.url)
        with trio.fail_after(30):
            signed_out = await http.request("GET", "/ui/fragments/approvals")
            assert (signed_out.status, signed_out.headers["location"]) == (303, "/ui/login")
            alice_cookie, _ = await sign_in(http, ALICE)
            bob_cookie, _ = await sign_in(http, BOB)
            alice = Http(api.url, ALICE)
            sid = await alice.session()
            async with trio.open_nursery() as nursery:

                async def echo() -> None:
                    await alice.call(sid, (await alice.turn(sid))["turn_id"], "mini_echo", {"text": EVIL})

                nursery.start_soon(echo)
                while not (await alice.request("GET", "/v1/approvals")).json()["approvals"]:  # noqa: ASYNC110 - the API's own list
                    await trio.sleep(0.02)
                # No CSRF token: reading changes nothing.
                read = await http.request("GET", "/ui/fragments/approvals", headers={"Cookie": alice_cookie})
                assert read.status == 200 and read.headers["content-type"] == "application/json"
                assert read.headers["content-security-policy"].startswith("default-src 'none'")
                [item] = read.json()["approvals"]
                assert item["arguments"] == json.dumps(
                    {"text": EVIL}, sort_keys=True
                )  # as the page shows them
                assert (item["tool"], item["server"], item["tenant"]) == ("mini_echo", "mini", "alice")
                theirs = await http.request("GET", "/ui/fragments/approvals", headers={"Cookie": bob_cookie})
                assert theirs.json() == {"approvals": []}  # the API's tenants decide
                # The calls in flight: the waiting call, its cells; none of it for bob.
                calls = await http.request("GET", "/ui/fragments/calls", headers={"Cookie": alice_cookie})
                [waiting] = calls.json()["calls"]
                assert set(waiting) == set(CALL_CELLS) and waiting["call_id"].startswith("c")
                assert (waiting["tool"], waiting["tenant"], waiting["session"]) == ("mini_echo", "alice", sid)
                bobs = await http.request("GET", "/ui/fragments/calls", headers={"Cookie": bob_cookie})
                assert bobs.json() == {"calls": []}
                # The servers, as the table shows them (read once as the event stream opens).
                servers = await http.request("GET", "/ui/fragments/servers", headers={"Cookie": alice_cookie})
                [mini] = servers.json()["servers"]
                assert set(mini) == set(SERVER_CELLS) and (mini["name"], mini["state"]) == ("mini", "steady")
                unknown = await http.request("GET", "/ui/fragments/tools", headers={"Cookie": alice_cookie})
                assert (
                    unknown.status == 404
                    and "the fragments are approvals, calls, servers" in unknown.json()["error"]
                )
                assert set(FRAGMENTS) == {
                    "approvals",
                    "calls",
                    "servers",
                }  # the allow-list: nothing else of the API
                posted = await http.request(
                    "POST", "/ui/fragments/approvals", headers={"Cookie": alice_cookie}
                )
                assert posted.status == 404
                nursery.cancel_scope.cancel()
