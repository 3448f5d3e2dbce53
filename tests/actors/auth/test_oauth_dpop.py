"""DPoP (RFC 9449, actors/auth/dpop.py): proofs on the token request and on every request
to the MCP server, both servers' nonces, the key kept in the vault and never shown. A
scripted authorization server and MCP server on an ``httpx2.MockTransport`` check each
proof as a server would (signature by the header's key, ``htm``, ``htu``, ``ath``)."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from typing import Any
from urllib.parse import parse_qsl

import attrs
import httpx2
import pytest
import trio
from joserfc import jwt
from joserfc.jwk import ECKey

from actors.auth.provider import MemoryVault, OAuthProvider, OAuthSettings
from actors.auth.records import AuthRecord
from actors.redaction import Redactor
from actors.spec import ServerSpec
from actors.transport_errors import AuthRequired
from actors.transports.http_link import Inbox, RemoteLink
from tests.actors.auth.test_oauth_provider import AS, MCP, discovery

NONCE = "as-nonce-1"
RS_NONCE = "rs-nonce-1"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def check_proof(proof: str, method: str, url: str) -> dict[str, Any]:
    """The claims of a valid proof (asserts what a server checks, RFC 9449 §4.3)."""
    header = json.loads(base64.urlsafe_b64decode(proof.split(".")[0] + "=="))
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    assert "d" not in header["jwk"]  # the public key only
    claims = dict(jwt.decode(proof, ECKey.import_key(header["jwk"]), algorithms=["ES256"]).claims)
    assert claims["htm"] == method and claims["htu"] == url
    assert isinstance(claims["jti"], str) and len(claims["jti"]) >= 16
    claims["jkt"] = ECKey.import_key(header["jwk"]).thumbprint()
    return claims


@attrs.define
class DPoPServers:
    """The AS (metadata, token endpoint) and the MCP server; every proof is recorded."""

    algs: list[str] | None = attrs.Factory(lambda: ["ES256"])
    as_nonce: bool = False  # the token endpoint wants NONCE in the proof
    rs_nonce: bool = False  # the MCP server wants RS_NONCE in the proof
    rs_nonce_always_new: bool = False  # ...and a new one every time (a broken server)
    token_proofs: list[dict[str, Any]] = attrs.Factory(list)
    mcp_proofs: list[dict[str, Any]] = attrs.Factory(list)
    forms: list[dict[str, str]] = attrs.Factory(list)
    issued: int = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        found = discovery(url, {} if self.algs is None else {"dpop_signing_alg_values_supported": self.algs})
        if found is not None:
            return found
        if url == f"{AS}/token":
            return self._token(request)
        if url.startswith(MCP):
            return self._mcp(request)
        return httpx2.Response(404)

    def _token(self, request: httpx2.Request) -> httpx2.Response:
        self.forms.append(dict(parse_qsl(request.content.decode())))
        proof = request.headers.get("dpop")
        if proof is None:
            self.issued += 1
            return httpx2.Response(200, json={"access_token": f"at-{self.issued}", "token_type": "Bearer"})
        claims = check_proof(proof, "POST", f"{AS}/token")
        self.token_proofs.append(claims)
        if self.as_nonce and claims.get("nonce") != NONCE:
            return httpx2.Response(400, headers={"DPoP-Nonce": NONCE}, json={"error": "use_dpop_nonce"})
        self.issued += 1
        return httpx2.Response(200, json={"access_token": f"at-{self.issued}", "token_type": "DPoP"})

    def _mcp(self, request: httpx2.Request) -> httpx2.Response:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if not token:
            return httpx2.Response(401, headers={"WWW-Authenticate": "DPoP"})
        assert scheme == "DPoP"
        claims = check_proof(request.headers["dpop"], request.method, MCP)
        assert claims["ath"] == b64(hashlib.sha256(token.encode()).digest())
        self.mcp_proofs.append(claims)
        wanted = f"{RS_NONCE}-{len(self.mcp_proofs)}" if self.rs_nonce_always_new else RS_NONCE
        if (self.rs_nonce or self.rs_nonce_always_new) and claims.get("nonce") != wanted:
            challenge = 'DPoP error="use_dpop_nonce", error_description="nonce wanted"'
            return httpx2.Response(401, headers={"WWW-Authenticate": challenge, "DPoP-Nonce": wanted})
        return httpx2.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {}})


def provider(servers: DPoPServers, vault: MemoryVault | None = None, **settings: str) -> OAuthProvider:
    settings = {"flow": "client_credentials", "client_id": "svc", "client_secret": "s3cret", **settings}
    return OAuthProvider(
        "docs", MCP, OAuthSettings.from_mapping(settings), vault or MemoryVault(),
        clock=lambda: 1000.0, transport=httpx2.MockTransport(servers),
    )  # fmt: skip


async def test_token_and_mcp_requests_carry_fresh_proofs_of_one_stored_key() -> None:
    servers, vault = DPoPServers(), MemoryVault()
    oauth = provider(servers, vault)
    await oauth.unauthorized(None, 'DPoP resource_metadata="https://mcp.example/x"')
    (token_proof,) = servers.token_proofs
    assert token_proof["iat"] == 1000 and "ath" not in token_proof and "nonce" not in token_proof
    assert oauth.authorization() == "DPoP at-1"
    first = check_proof(oauth.proof("POST", f"{MCP}?a=1#frag")["DPoP"], "POST", MCP)  # no query
    second = check_proof(oauth.proof("GET", MCP)["DPoP"], "GET", MCP)
    assert first["ath"] == second["ath"] == b64(hashlib.sha256(b"at-1").digest())
    assert first["jti"] != second["jti"]  # fresh for every request
    assert first["jkt"] == second["jkt"] == token_proof["jkt"]
    # The key is in the stored record: a restart proves with the same key.
    (stored,) = vault.records.values()
    assert stored["dpop_key"]["kty"] == "EC" and stored["dpop_key"]["d"]
    again = provider(servers, vault)
    await again.prepare()
    assert again.authorization() == "DPoP at-1"
    assert check_proof(again.proof("POST", MCP)["DPoP"], "POST", MCP)["jkt"] == token_proof["jkt"]


async def test_the_authorization_servers_nonce_is_sent_on_one_retry() -> None:
    servers = DPoPServers(as_nonce=True)
    oauth = provider(servers)
    await oauth.unauthorized(None, None)
    assert [p.get("nonce") for p in servers.token_proofs] == [None, NONCE]
    assert oauth.authorization() == "DPoP at-1"
    oauth._flows.record = attrs.evolve(oauth._flows.record, tokens=None)
    await oauth.unauthorized(None, None)  # the nonce is remembered: no second challenge
    assert [p.get("nonce") for p in servers.token_proofs] == [None, NONCE, NONCE]


async def test_a_token_endpoint_that_keeps_asking_for_a_nonce_is_retried_only_once() -> None:
    class Stubborn(DPoPServers):
        def _token(self, request: httpx2.Request) -> httpx2.Response:
            self.token_proofs.append(check_proof(request.headers["dpop"], "POST", f"{AS}/token"))
            fresh = f"n-{len(self.token_proofs)}"
            return httpx2.Response(400, headers={"DPoP-Nonce": fresh}, json={"error": "use_dpop_nonce"})

    servers = Stubborn()
    with pytest.raises(AuthRequired) as caught:
        await provider(servers).unauthorized(None, None)
    assert len(servers.token_proofs) == 2
    assert "the token request was refused: HTTP 400 (use_dpop_nonce)" in str(caught.value)


@pytest.mark.parametrize(
    ("algs", "mode", "bound"),
    [
        (["ES256", "RS256"], "auto", True),
        (["ES256"], "required", True),
        (None, "auto", False),  # the server does not offer DPoP: bearer tokens
        (["RS256"], "auto", False),  # nor proofs we can sign
        (["ES256"], "off", False),
    ],
)
async def test_dpop_is_used_when_the_setting_and_the_server_agree(
    algs: list[str] | None, mode: str, bound: bool
) -> None:
    servers = DPoPServers(algs=algs)
    oauth = provider(servers, dpop=mode)
    await oauth.unauthorized(None, None)
    assert bool(servers.token_proofs) is bound
    assert oauth.authorization() == ("DPoP at-1" if bound else "Bearer at-1")
    assert bool(oauth.proof("POST", MCP)) is bound


async def test_dpop_required_refuses_an_authorization_server_without_it() -> None:
    servers = DPoPServers(algs=["RS256"])
    with pytest.raises(AuthRequired) as caught:
        await provider(servers, dpop="required").unauthorized(None, None)
    assert '"dpop": "required"' in str(caught.value) and "RS256" in str(caught.value)
    assert servers.forms == []  # no token asked for


def link_for(servers: DPoPServers, oauth: OAuthProvider, nursery: trio.Nursery) -> RemoteLink:
    spec = ServerSpec(name="docs", type="remote", url=MCP)
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(servers))
    return RemoteLink(spec, client, nursery, Inbox(), Redactor(()), auth=oauth)


async def test_the_mcp_servers_nonce_is_sent_on_one_retry_and_then_always() -> None:
    servers = DPoPServers(rs_nonce=True)
    async with trio.open_nursery() as nursery:
        link = link_for(servers, provider(servers), nursery)
        first = await link.open("POST", MCP, {}, "the call")
        second = await link.open("POST", MCP, {}, "the next call")
    assert first.status_code == second.status_code == 200
    assert [p.get("nonce") for p in servers.mcp_proofs] == [None, RS_NONCE, RS_NONCE]
    assert len(servers.forms) == 1  # a nonce challenge is not a reason for a new token


async def test_an_mcp_server_that_wants_a_new_nonce_every_time_is_not_retried_forever() -> None:
    servers = DPoPServers(rs_nonce_always_new=True)
    async with trio.open_nursery() as nursery:
        link = link_for(servers, provider(servers), nursery)
        with pytest.raises(AuthRequired):
            await link.open("POST", MCP, {}, "the call")
    assert len(servers.mcp_proofs) <= 4  # one nonce retry, one renewal, then needs_auth


async def test_the_private_key_is_never_logged_or_shown(caplog: pytest.LogCaptureFixture) -> None:
    """Planted secret: the private key (``d``) in every log record, error and repr."""
    caplog.set_level(logging.DEBUG)
    servers, vault = DPoPServers(as_nonce=True), MemoryVault()
    oauth = provider(servers, vault)
    await oauth.unauthorized(None, None)
    private = vault.records[("docs", MCP)]["dpop_key"]["d"]
    record = AuthRecord.from_json(vault.records[("docs", MCP)])
    assert record is not None and private in record.secrets()  # the redactors mask it
    failing = provider(DPoPServers(algs=["RS256"]), vault, dpop="required")
    with pytest.raises(AuthRequired) as caught:
        await failing.unauthorized(None, None)
    signer = oauth._flows.signer()
    shown = [str(caught.value), repr(signer), oauth.proof("POST", MCP)["DPoP"]]
    shown += [repr(r.__dict__) + r.getMessage() for r in caplog.records]
    assert caplog.records and not [text for text in shown if private in text]


def test_a_dpop_token_is_taken_only_for_a_request_with_a_proof() -> None:
    from actors.auth.records import Tokens

    body = {"access_token": "at", "token_type": "DPoP"}
    assert Tokens.from_response(body, 0.0, dpop=True).token_type == "DPoP"
    with pytest.raises(ValueError, match="token_type is 'DPoP', not Bearer"):
        Tokens.from_response(body, 0.0)
    stored = AuthRecord(tokens=Tokens.from_response(body, 0.0, dpop=True)).to_json()
    restored = AuthRecord.from_json(stored)
    assert restored is not None and restored.tokens is not None and restored.tokens.token_type == "DPoP"


async def test_a_nonce_retry_signs_a_new_client_assertion() -> None:
    """private_key_jwt with a DPoP nonce: the retried token request carries a new client
    assertion, as a strict server refuses a replayed ``jti`` (RFC 7523 §3)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    servers = DPoPServers(as_nonce=True)
    oauth = provider(servers, private_key=pem.decode(), signing_algorithm="ES256", client_secret="")
    await oauth.unauthorized(None, None)
    assert [p.get("nonce") for p in servers.token_proofs] == [None, NONCE]
    first, second = (form["client_assertion"] for form in servers.forms)
    jtis = [json.loads(base64.urlsafe_b64decode(a.split(".")[1] + "=="))["jti"] for a in (first, second)]
    assert jtis[0] != jtis[1]
    assert oauth.authorization() == "DPoP at-1"
