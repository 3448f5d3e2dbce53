"""A ``per_user`` server through ``/mcp`` (real ``serve``, the loopback OAuth test server):
a person who has not signed in gets JSON-RPC error -32042 (URLElicitationRequiredError)
with their own authorization URL as a URL-mode elicitation, on their client only; their
browser comes back to ``GET /v1/oauth/callback``; their client hears
``notifications/elicitation/complete`` and its next call carries their token. Persons
are the tenants of two static tokens."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs
import httpx2
import trio

from supervisor.settings.model import AdminSettings, TokenGrant
from supervisor.web.roles import Role
from tests.end_to_end.test_oauth_client import auth_server
from tests.runtime.test_person_connections import ECHO, NAME, config, ready
from tests.support.admin import ALICE, BOB, TOKENS, Http, admin_running
from tests.support.gateway_http import McpHttp, events_until
from tests.support.paths import SERVERS

sys.path.insert(0, str(SERVERS))
from oauth_server import OAuthServer

URL_ELICITATION_REQUIRED = -32042
OPERATOR = "operator-token-0123456789"


async def sign_in(url: str, person: str, public: str = "", served: str = "") -> httpx2.Response:
    """``person``'s browser: consent at the authorization server (the test server reads
    ``user``), then the redirect back to the service's callback route (under
    ``public``, reached at ``served``, as through a TLS proxy, when given)."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as http:
        consent = await http.get(f"{url}&user={person}")
        assert consent.status_code == 302, consent.text
        back = consent.headers["location"]
        if public:
            assert back.startswith(f"{public}/v1/oauth/callback?"), back
            back = served + back.removeprefix(public)
        return await http.get(back)


def echo(request_id: int, text: str) -> tuple[int, str, dict[str, Any]]:
    return request_id, "tools/call", {"name": ECHO, "arguments": {"text": text}}


async def test_the_second_person_gets_a_url_elicitation_on_their_client_only(tmp_path: Path) -> None:
    async with auth_server() as server:
        cfg = attrs.evolve(config(server.mcp_url), admin=AdminSettings(tokens=TOKENS))
        async with admin_running(cfg, tmp_path) as api:
            await first_person_signs_in(server, api.sup, Http(api.url, ALICE))
            alice, bob = McpHttp(Http(api.url, ALICE)), McpHttp(Http(api.url, BOB))
            await alice.open()
            await bob.open()
            await alice.call(1, "tools/list")
            await bob.call(1, "tools/list")
            listen = {"Accept": "text/event-stream"}
            async with (
                alice.http.stream("GET", "/mcp", headers=alice.headers(listen)) as alice_hears,
                bob.http.stream("GET", "/mcp", headers=bob.headers(listen)) as bob_hears,
            ):
                asked = await bob.call(*echo(2, "b1"))
                error = asked["error"]
                assert (
                    error["code"] == URL_ELICITATION_REQUIRED and "bob has not signed in" in error["message"]
                )
                (elicitation,) = error["data"]["elicitations"]
                assert elicitation["mode"] == "url" and elicitation["url"].startswith(server.issuer)
                assert elicitation["elicitationId"] and elicitation["message"] == error["message"]
                users = len(server.mcp_users)
                answered = await alice.call(*echo(2, "a1"))  # alice goes on meanwhile
                assert answered["result"]["isError"] is False and server.mcp_users[users:] == ["alice"]

                page = await sign_in(elicitation["url"], "bob")
                assert page.status_code == 200 and "bob is signed in to gh" in page.text
                with trio.fail_after(5):
                    heard = await events_until(bob_hears, lambda event: event.data is not None)
                (done,) = [event.data for event in heard if event.data is not None]
                assert done["method"] == "notifications/elicitation/complete"
                assert done["params"] == {"elicitationId": elicitation["elicitationId"]}
                await ready(api.sup, "bob")
                answered = await bob.call(*echo(3, "b2"))
                assert answered["result"]["isError"] is False and server.mcp_users[-1] == "bob"
                with trio.move_on_after(0.3):  # the first client heard nothing of it
                    heard = await events_until(alice_hears, lambda event: event.data is not None)
                    raise AssertionError(f"alice's client heard {heard}")

                again = await sign_in(elicitation["url"], "bob")  # its state was one-time
                assert again.status_code == 400 and "unknown, used already or expired" in again.text


async def first_person_signs_in(server: OAuthServer, sup: Any, admin: Http) -> None:
    """Before anyone connected the server lists no tools: alice's first turn (the admin
    API's) files her sign-in, and her browser finishes it."""
    sid = await admin.session()
    await admin.turn(sid)
    signing = sup.people.sign_ins.pending(NAME, "alice")
    assert signing is not None
    page = await sign_in(signing.url, "alice")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    await ready(sup, "alice")
    assert server.authorize_requests[-1]["user"] == "alice"


async def test_server_detail_counts_people_per_state(tmp_path: Path) -> None:
    async with auth_server() as server:
        tokens = {**TOKENS, OPERATOR: TokenGrant("ops", Role.OPERATOR)}
        cfg = attrs.evolve(config(server.mcp_url), admin=AdminSettings(tokens=tokens))
        async with admin_running(cfg, tmp_path) as api:
            before = (await Http(api.url, ALICE).request("GET", f"/v1/servers/{NAME}")).json()
            assert before["people"] == {}
            await first_person_signs_in(server, api.sup, Http(api.url, ALICE))
            bob = Http(api.url, BOB)
            await bob.turn(await bob.session())
            detail = (await bob.request("GET", f"/v1/servers/{NAME}")).json()
            assert detail["people"] == {"needs_auth": 1, "steady": 1}  # counts, for a tenant too
            assert "alice" not in str(detail["people"]) and "bob" not in str(detail["people"])
            operator = Http(api.url, OPERATOR)
            refused = await operator.request("POST", f"/v1/servers/{NAME}/restart")
            assert refused.status == 409 and "per_user" in refused.json()["error"]["message"]
