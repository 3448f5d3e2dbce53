"""Signed-in people and ``per_user`` servers, end to end: real ``serve``, our loopback
identity provider (``tests/support/idp.py``) for sign-in at ``/mcp``, and the loopback
OAuth test server as the remote server (it proves whose token each request carried).

Two people of one tenant: each call carries that person's own upstream token; the
second person's first call is a URL elicitation (-32042) to their client only, and
their browser finishes it at the callback under ``signin.resource``. With token
exchange (RFC 8693), a person's sign-in token is exchanged for an upstream one: no
browser, no second sign-in.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import trio
from joserfc import jwt
from joserfc.errors import JoseError

from actors.auth.grants import TOKEN_EXCHANGE
from supervisor.settings.signin import IssuerSettings, SigninSettings
from tests.gateway.test_gateway_per_user import URL_ELICITATION_REQUIRED, echo, sign_in
from tests.runtime.test_person_connections import NAME, config, ready
from tests.support.admin import Http, Running, admin_running
from tests.support.gateway_http import McpHttp, events_until
from tests.support.idp import RESOURCE, Idp, idp_running
from tests.support.paths import SERVERS

sys.path.insert(0, str(SERVERS))
from oauth_server import GRANT_TYPES, OAuthOptions, OAuthServer, serve_oauth_server


def exchange_subject(idp: Idp) -> Any:
    """The upstream authorization server trusts our identity provider: a subject token
    it signed stands for its ``sub`` (anything else is refused)."""

    def person(token: str) -> str | None:
        try:
            claims = jwt.decode(token, idp.key, algorithms=["RS256"]).claims
        except (JoseError, ValueError):
            return None
        return str(claims["sub"])

    return person


@asynccontextmanager
async def running(tmp_path: Path, *, exchange: bool) -> AsyncIterator[tuple[Idp, OAuthServer, Running]]:
    async with idp_running() as idp, trio.open_nursery() as nursery:
        grants = [*GRANT_TYPES, TOKEN_EXCHANGE]
        options = OAuthOptions(grant_types=grants, exchange_subject=exchange_subject(idp))
        server: OAuthServer = await nursery.start(serve_oauth_server, options)
        cfg = config(server.mcp_url)
        if exchange:
            spec = cfg.servers[0]
            exchanging = attrs.evolve(spec, oauth={**spec.oauth, "token_exchange": True})
            cfg = attrs.evolve(cfg, servers=(exchanging,))
        signin = SigninSettings(RESOURCE, (IssuerSettings(issuer=idp.issuer, tenant="acme"),))
        async with admin_running(attrs.evolve(cfg, signin=signin), tmp_path) as api:
            yield idp, server, api
        nursery.cancel_scope.cancel()


async def browser(url: str, person: str, api: Running) -> httpx2.Response:
    """``person``'s browser: back to the callback under the public ``signin.resource``
    (which a TLS proxy would map to this service)."""
    return await sign_in(url, person, RESOURCE, api.url)


async def people_audited(api: Running) -> list[tuple[str, str | None]]:
    await api.sup.store.flush()
    rows = await api.sup.store.read(lambda s: s.audit_rows(limit=100))
    return [(row.tenant, row.person) for row in reversed(rows) if row.server == NAME and row.outcome == "ok"]


async def test_two_signed_in_people_of_one_tenant_each_call_with_their_own_token(tmp_path: Path) -> None:
    async with running(tmp_path, exchange=False) as (idp, server, api):
        alice_token, bob_token = idp.token(sub="alice"), idp.token(sub="bob")
        admin = Http(api.url, alice_token)  # alice is the first: her turn files her sign-in
        await admin.turn(await admin.session())
        signing = api.sup.people.sign_ins.pending(NAME, "alice")
        assert signing is not None
        assert (await browser(signing.url, "alice", api)).status_code == 200
        await ready(api.sup, "alice")

        alice, bob = McpHttp(Http(api.url, alice_token)), McpHttp(Http(api.url, bob_token))
        await alice.open()
        await bob.open()
        await alice.call(1, "tools/list")
        await bob.call(1, "tools/list")
        listen = {"Accept": "text/event-stream"}
        async with (
            alice.http.stream("GET", "/mcp", headers=alice.headers(listen)) as alice_hears,
            bob.http.stream("GET", "/mcp", headers=bob.headers(listen)) as bob_hears,
        ):
            error = (await bob.call(*echo(2, "b1")))["error"]
            assert error["code"] == URL_ELICITATION_REQUIRED and "bob" in error["message"]
            (elicitation,) = error["data"]["elicitations"]
            assert elicitation["mode"] == "url" and elicitation["url"].startswith(server.issuer)
            answered = await alice.call(*echo(2, "a1"))  # alice goes on meanwhile, as herself
            assert answered["result"]["isError"] is False and server.mcp_users[-1] == "alice"

            assert (await browser(elicitation["url"], "bob", api)).status_code == 200
            with trio.fail_after(5):
                heard = await events_until(bob_hears, lambda event: event.data is not None)
            told = [event.data["method"] for event in heard if event.data is not None]
            assert told == ["notifications/elicitation/complete"]
            await ready(api.sup, "bob")
            answered = await bob.call(*echo(3, "b2"))
            assert answered["result"]["isError"] is False and server.mcp_users[-1] == "bob"
            with trio.move_on_after(0.3):  # alice's client heard nothing of bob's sign-in
                heard = await events_until(alice_hears, lambda event: event.data is not None)
                raise AssertionError(f"alice's client heard {heard}")
        assert server.exchanged == []
        assert await people_audited(api) == [("acme", "alice"), ("acme", "bob")]


async def test_token_exchange_needs_no_second_sign_in(tmp_path: Path) -> None:
    async with running(tmp_path, exchange=True) as (idp, server, api):
        for n, person in enumerate(("carol", "dave")):
            client = McpHttp(Http(api.url, idp.token(sub=person)))
            await client.open()
            await client.call(1, "tools/list")  # the first turn starts their connection
            await ready(api.sup, person)  # ready by exchange alone: nobody's browser
            answered = await client.call(*echo(2, person))
            assert answered["result"]["isError"] is False, answered
            assert server.mcp_users[-1] == person and server.exchanged == ["carol", "dave"][: n + 1]
        assert server.authorize_requests == []  # no browser sign-in at all
        exchanges = [form for form in server.token_requests if form["grant_type"] == TOKEN_EXCHANGE]
        assert [exchange_subject(idp)(form["subject_token"]) for form in exchanges] == ["carol", "dave"]
        assert await people_audited(api) == [("acme", "carol"), ("acme", "dave")]
