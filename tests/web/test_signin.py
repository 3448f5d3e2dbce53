"""Sign-in on the real server: access tokens of a loopback identity provider
(``tests/support/idp.py``) at ``/mcp`` and the admin API, beside the static tokens.

Every refused token is a 401 whose reason (in the body and in ``WWW-Authenticate``)
names what is wrong, and its call never reaches the MCP server (the mini server logs
every ``tools/call`` it receives: the log stays empty until a good token calls).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import trio
from joserfc.jwk import OctKey, RSAKey
from mcp.client.auth.utils import extract_resource_metadata_from_www_auth
from mcp.shared.auth import ProtectedResourceMetadata

from supervisor.settings.loader import load_config
from supervisor.settings.signin import IssuerSettings, RoleMapping, SigninSettings
from tests.gateway.test_gateway_http_new_era import BASE as NEW_ERA
from tests.gateway.test_gateway_stateless import request as new_era_request
from tests.service.test_reload import server, write
from tests.support.admin import ALICE, TOKENS, Reply, Running, admin_running, config_of, mini_spec
from tests.support.gateway_http import McpHttp, request
from tests.support.idp import RESOURCE, Idp, idp_running

CALL = request(1, "tools/call", {"name": "mini_echo", "arguments": {"text": "hi"}})
MCP_METADATA = f"{RESOURCE}/.well-known/oauth-protected-resource/mcp"


def issuer_of(idp: Idp, **changes: Any) -> IssuerSettings:
    """The provider as the config names it: no jwks_uri (discovery finds it), the
    tenant from ``org``, operator and peer from scopes."""
    roles = RoleMapping(operator=("mcp:admin",), peer=("mcp:peer",))
    return IssuerSettings(issuer=idp.issuer, tenant_claim="org", roles=roles, **changes)


@asynccontextmanager
async def signed_in_server(tmp_path: Path, *issuers: IssuerSettings) -> AsyncIterator[Running]:
    config = config_of(mini_spec("mini", "--calls-log", str(tmp_path / "calls.log")), tokens=TOKENS)
    config = attrs.evolve(config, signin=SigninSettings(RESOURCE, issuers))
    async with admin_running(config, tmp_path / "state") as api:
        yield api


def as_response(reply: Reply) -> httpx2.Response:
    """Our reply as the MCP SDK's client sees an answer (an httpx2 response)."""
    return httpx2.Response(reply.status, headers=dict(reply.headers), content=reply.body)


def calls(tmp_path: Path) -> int:
    log = tmp_path / "calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def refused_because(reply: Reply, reason: str) -> None:
    """A 401 on /mcp naming ``reason``, in its JSON-RPC error and its challenge."""
    assert reply.status == 401, reply
    message = reply.json()["error"]["message"]
    assert reason in message, message
    challenge = reply.headers["www-authenticate"]
    start = f'Bearer resource_metadata="{MCP_METADATA}", error="invalid_token", error_description="'
    assert challenge.startswith(start) and challenge.endswith('"'), challenge
    # a client finds the metadata as the MCP SDK's does, whatever the reason quotes
    assert extract_resource_metadata_from_www_auth(as_response(reply)) == MCP_METADATA


async def test_each_bad_token_is_refused_naming_why_and_never_reaches_the_server(tmp_path: Path) -> None:
    async with idp_running() as idp, signed_in_server(tmp_path, issuer_of(idp)) as api:
        hmac_key = OctKey.import_key(b"k" * 32)
        stranger = RSAKey.generate_key(2048, parameters={"kid": "k1"}, private=True)
        good = idp.token()
        head, payload, signature = good.split(".")
        cases = {
            "expired": (idp.token(exp=1_000), "the token expired at"),
            "audience": (idp.token(aud="https://other.example"),
                         f"audience is https://other.example, not this service's resource {RESOURCE}"),
            "issuer": (idp.token(iss="https://evil.example/"),
                       "the token's issuer \"https://evil.example/\" is not one"),
            "none": (f"{_b64({'alg': 'none', 'kid': 'k1'})}.{payload}.", "unsigned (alg none)"),
            "hmac": (idp.token(header={"alg": "HS256"}, key=hmac_key), "shared-secret algorithm"),
            "alg": (idp.token(header={"alg": "RS512"}), "not one of issuer"),
            "tampered": (f"{head}.{_b64({**json.loads(_unb64(payload)), 'sub': 'root'})}.{signature}",
                         "signature does not verify"),
            "other key": (idp.token(key=stranger), "signature does not verify"),
            "unknown kid": (idp.token(header={"kid": "nobody"}), "key id \"nobody\" is not in issuer"),
            "not yet": (idp.token(nbf=2_000_000_000), "not valid before"),
            "no tenant": (idp.token(org=None), "'org' claim names the caller's tenant"),
            "opaque": ("an-opaque-token-0123", "no issuer has an introspection endpoint"),
        }  # fmt: skip
        with trio.fail_after(20):
            for name, (token, reason) in cases.items():
                reply = await api.http(token).request("POST", "/mcp", json=CALL)
                refused_because(reply, reason)
                assert token not in reply.body.decode() and token not in reply.headers["www-authenticate"], (
                    name
                )
            assert calls(tmp_path) == 0  # not one of them reached the MCP server
            assert idp.hits["/.well-known/openid-configuration"] == 1  # jwks_uri found by discovery, once
            assert idp.hits["/jwks"] == 1  # fetched once: the unknown kid came within 30 s of it

            mcp = McpHttp(api.http(good))
            await mcp.open()
            echoed = await mcp.call(2, "tools/call", {"name": "mini_echo", "arguments": {"text": "hi"}})
            assert echoed["result"]["isError"] is False and calls(tmp_path) == 1
            static = McpHttp(api.http(ALICE))  # a static token keeps working, and its meaning
            await static.open()
            assert (await static.call(2, "tools/call", {"name": "mini_echo", "arguments": {"text": "x"}}))[
                "result"
            ]
            await api.sup.store.flush()
            rows = await api.sup.store.read(lambda s: s.audit_rows(limit=100))
            assert sorted((row.tenant, row.person) for row in rows if row.tool == "mini_echo") == [
                ("acme", "ada"),
                ("alice", "alice"),  # a static token: its person is its tenant name
            ]


def _b64(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


async def test_the_metadata_and_the_401_lead_a_client_to_the_issuer(tmp_path: Path) -> None:
    async with idp_running() as idp, signed_in_server(tmp_path, issuer_of(idp)) as api:
        anonymous = api.http()
        with trio.fail_after(10):
            reply = await anonymous.request("POST", "/mcp", json=CALL)
            assert (
                reply.status == 401
                and reply.headers["www-authenticate"] == f'Bearer resource_metadata="{MCP_METADATA}"'
            )
            assert extract_resource_metadata_from_www_auth(as_response(reply)) == MCP_METADATA  # the SDK's
            admin = await anonymous.request("GET", "/v1/servers")
            assert admin.status == 401
            assert admin.headers["www-authenticate"].endswith('/.well-known/oauth-protected-resource/v1"')
            expected = {
                "resource": RESOURCE,
                "authorization_servers": [idp.issuer],
                "bearer_methods_supported": ["header"],
            }
            for path in ("", "/mcp", "/v1"):
                document = await anonymous.request("GET", f"/.well-known/oauth-protected-resource{path}")
                metadata = ProtectedResourceMetadata.model_validate_json(document.body)  # as the SDK reads it
                assert [str(url).rstrip("/") for url in metadata.authorization_servers] == [idp.issuer]
                assert document.status == 200 and document.json() == expected, path
            assert calls(tmp_path) == 0


async def test_roles_come_from_scopes(tmp_path: Path) -> None:
    async with idp_running() as idp, signed_in_server(tmp_path, issuer_of(idp)) as api:
        tenant, operator = api.http(idp.token(scope="openid")), api.http(idp.token(scope="openid mcp:admin"))
        peer = api.http(idp.token(scope="mcp:peer"))
        with trio.fail_after(10):
            refused = await tenant.request("POST", "/v1/servers/mini/restart")
            assert (
                refused.status == 403
                and "this token has the tenant role" in refused.json()["error"]["message"]
            )
            assert (await tenant.request("GET", "/v1/servers")).status == 200
            assert (await operator.request("POST", "/v1/servers/mini/restart")).status < 300
            assert (await peer.request("GET", "/v1/servers")).status == 403


async def test_admin_api_and_new_era_calls_are_made_for_the_person(tmp_path: Path) -> None:
    """A fixed tenant for the issuer; the person is ``sub``, in the audit rows of an
    admin API session and of the per-request era's state (one per tenant and person)."""
    async with idp_running() as idp:
        fixed = attrs.evolve(issuer_of(idp), tenant="fixed", tenant_claim=None)
        async with signed_in_server(tmp_path, fixed) as api:
            grace = api.http(idp.token(sub="grace", org=None))
            with trio.fail_after(15):
                sid = await grace.session()
                tid = (await grace.turn(sid))["turn_id"]
                assert (await grace.call(sid, tid, "mini_echo", {"text": "hi"})).status == 200
                call = new_era_request(1, "tools/call", {"name": "mini_echo", "arguments": {"text": "yo"}})
                headers = {**NEW_ERA, "Mcp-Method": "tools/call", "Mcp-Name": "mini_echo"}
                answer = await api.http(idp.token(sub="linus")).request(
                    "POST", "/mcp", json=call, headers=headers
                )
                assert answer.status == 200 and answer.json()["result"]["isError"] is False, answer
                await api.sup.store.flush()
                rows = await api.sup.store.read(lambda s: s.audit_rows(limit=100))
                people = sorted((row.tenant, row.person) for row in rows if row.tool == "mini_echo")
                assert people == [("fixed", "grace"), ("fixed", "linus")]


async def test_a_reload_applies_a_changed_signin_section(tmp_path: Path) -> None:
    """Live: the next request sees the new issuers; an unchanged section keeps its key
    sets; a removed one turns sign-in off (the static tokens go on)."""
    async with idp_running() as idp, idp_running() as other:
        section = {"resource": RESOURCE, "issuers": [{"issuer": idp.issuer, "tenant": "acme"}]}
        file = write(
            tmp_path / "config.json", {"mini": server()}, admin={"tokens": {ALICE: "alice"}}, signin=section
        )
        async with admin_running(load_config(file), tmp_path / "state") as api:
            http = api.http(idp.token())
            with trio.fail_after(15):
                assert (await http.request("GET", "/v1/servers")).status == 200
                moved = {**section, "issuers": [{"issuer": other.issuer, "tenant": "acme"}]}
                write(file, {"mini": server()}, admin={"tokens": {ALICE: "alice"}}, signin=moved)
                assert (await api.sup.reload()).report()["applied_live"]["settings"] == ["signin"]
                refused = await http.request("GET", "/v1/servers")
                assert (
                    refused.status == 401
                    and "is not one this service trusts" in refused.json()["error"]["message"]
                )
                assert (await api.http(other.token()).request("GET", "/v1/servers")).status == 200
                write(file, {"mini": server()}, admin={"tokens": {ALICE: "alice"}})
                await api.sup.reload()
                assert (
                    await api.http().request("GET", "/.well-known/oauth-protected-resource")
                ).status == 404
                assert (await api.http(ALICE).request("GET", "/v1/servers")).status == 200
                assert other.hits["/jwks"] == 0 or other.hits["/.well-known/openid-configuration"] == 1
