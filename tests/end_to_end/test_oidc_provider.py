"""The sign-in tests' OpenID provider (npm's oidc-provider, tests/support/oidc_provider.py)
does what those tests rely on: it starts on a loopback port and its discovery document
names it; a PKCE code flow, its consent driven as a browser would, gets a JWT access
token whose ``aud`` is the resource asked for and whose ``sub`` is the person who signed
in, signed by a key the provider publishes; the official MCP SDK's OAuth client
(``sdk_auth``) finds it from a resource's 401, registers and signs a person in; and it is
gone when its block ends. It skips, saying why, only when Node or the package truly
cannot be had here.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve
from joserfc import jwt
from joserfc.errors import BadSignatureError, ExpiredTokenError

from tests.support.oidc_provider import OidcProvider, oidc_provider, sdk_auth

RESOURCE, ELSEWHERE = "https://mcp.example.test", "https://elsewhere.example.test"


async def test_the_provider_starts_and_its_discovery_names_its_issuer(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with oidc_provider(tmp_path) as provider:
            assert provider.issuer.startswith("http://127.0.0.1:")
            assert provider.discovery["issuer"] == provider.issuer
            assert provider.discovery["registration_endpoint"] == f"{provider.issuer}/reg"
            assert provider.discovery["code_challenge_methods_supported"] == ["S256"]
            assert {"mcp:admin", "mcp:peer"} <= set(provider.discovery["scopes_supported"])
            assert provider.jwks_uri.startswith(f"{provider.issuer}/")


async def test_a_pkce_code_flow_gets_a_jwt_for_the_resource_and_person_signed_by_the_provider(
    tmp_path: Path,
) -> None:
    with trio.fail_after(30):
        async with oidc_provider(tmp_path) as provider:
            alice = await provider.access_token("alice", RESOURCE, scope="mcp:admin")
            bob = await provider.access_token("bob", ELSEWHERE, scope="mcp:peer")
            keys = await provider.keys()
    token = jwt.decode(alice, keys, algorithms=["RS256"])
    assert token.header["alg"] == "RS256" and token.header["kid"] in {key.kid for key in keys}
    claims = token.claims
    assert (claims["iss"], claims["aud"], claims["sub"], claims["scope"]) == (
        provider.issuer,
        RESOURCE,
        "alice",
        "mcp:admin",
    )
    assert time.time() < claims["exp"] <= time.time() + 600
    other = jwt.decode(bob, keys, algorithms=["RS256"]).claims
    assert (other["aud"], other["sub"], other["scope"]) == (ELSEWHERE, "bob", "mcp:peer")
    head, body, signature = alice.split(".")
    flipped = ("B" if signature[0] == "A" else "A") + signature[1:]
    with pytest.raises(BadSignatureError):
        jwt.decode(f"{head}.{body}.{flipped}", keys, algorithms=["RS256"])


async def test_a_backdated_provider_issues_tokens_already_expired(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with oidc_provider(tmp_path, access_token_ttl_s=60, backdate_s=3600) as provider:
            token = jwt.decode(await provider.access_token("dora", RESOURCE), await provider.keys())
    assert token.claims["exp"] - token.claims["iat"] == 60
    assert token.claims["exp"] < time.time() - 3000
    with pytest.raises(ExpiredTokenError):
        jwt.JWTClaimsRegistry(exp={"essential": True}).validate(token.claims)


async def test_the_provider_process_group_is_gone_after_its_block(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with oidc_provider(tmp_path) as provider:
            os.killpg(provider.pid, 0)  # running, in a group of its own
    with pytest.raises(ProcessLookupError):
        os.killpg(provider.pid, 0)


Send = Callable[[dict[str, Any]], Awaitable[None]]


@asynccontextmanager
async def resource_server(provider: OidcProvider, seen: list[dict[str, Any]]) -> AsyncIterator[str]:
    """A bare protected resource on 127.0.0.1 (its base URL yielded): its metadata names
    ``provider``; ``/mcp`` answers 401 without a bearer token, else notes the token's
    verified claims in ``seen``. Only the sign-in, not ours: our own is in
    test_signin_oidc.py."""
    keys = await provider.keys()
    where: list[str] = []

    async def answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes = b"") -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def app(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        base = where[0]
        if scope["path"] == "/.well-known/oauth-protected-resource/mcp":
            metadata = {"resource": base, "authorization_servers": [provider.issuer]}
            await answer(send, 200, [(b"content-type", b"application/json")], orjson.dumps(metadata))
            return
        bearer = dict(scope["headers"]).get(b"authorization", b"").decode().removeprefix("Bearer ")
        if not bearer:
            challenge = f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
            await answer(send, 401, [(b"www-authenticate", challenge.encode())])
            return
        seen.append(jwt.decode(bearer, keys, algorithms=["RS256"]).claims)
        await answer(send, 200, [])

    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    async with trio.open_nursery() as nursery:
        where.extend(await nursery.start(functools.partial(serve, app, config)))  # type: ignore[arg-type]
        yield where[0]
        nursery.cancel_scope.cancel()


async def test_the_sdk_client_finds_the_provider_from_a_401_and_signs_a_person_in(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    with trio.fail_after(30):
        async with oidc_provider(tmp_path) as provider, resource_server(provider, seen) as base:
            signing_in = sdk_auth(provider, f"{base}/mcp", "carol")
            async with httpx2.AsyncClient(auth=signing_in, timeout=10) as http:
                assert (await http.post(f"{base}/mcp", json={})).status_code == 200
                assert (await http.post(f"{base}/mcp", json={})).status_code == 200  # the same token
    assert len(seen) == 2 and seen[0] == seen[1]
    assert (seen[0]["iss"], seen[0]["aud"], seen[0]["sub"]) == (provider.issuer, base, "carol")
    assert seen[0]["client_id"] != "harness"  # the SDK client registered itself
