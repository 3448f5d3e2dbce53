"""The sign-in tests' OpenID provider (npm's oidc-provider, tests/support/oidc_provider.py)
does what those tests rely on: it starts on a loopback port and its discovery document
names it; a PKCE code flow, its consent driven as a browser would, gets a JWT access
token whose ``aud`` is the resource asked for and whose ``sub`` is the person who signed
in, signed by a key the provider publishes; and it is gone when its block ends. It skips,
saying why, only when Node or the package truly cannot be had here.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import trio
from joserfc import jwt
from joserfc.errors import BadSignatureError

from tests.support.oidc_provider import oidc_provider

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


async def test_the_provider_process_group_is_gone_after_its_block(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with oidc_provider(tmp_path) as provider:
            os.killpg(provider.pid, 0)  # running, in a group of its own
    with pytest.raises(ProcessLookupError):
        os.killpg(provider.pid, 0)
