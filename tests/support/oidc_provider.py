"""A real OpenID provider not written here, for the sign-in tests: npm's certified
``oidc-provider`` (installed by .ci/setup into .venv/node), run by
``tests/servers/oidc_provider.mjs`` as a Node process of its own on a loopback port.

``oidc_provider(folder)`` writes the provider's settings into ``folder``, starts it in a
process group of its own, reads back the issuer it bound (``http://127.0.0.1:<port>``)
and its discovery document, and kills and reaps the group when the block ends. The
provider it yields signs people in as a browser would (``browser_sign_in``: its login and
consent pages are HTML forms, posted back with the cookies it set) and mints real access
tokens through its own PKCE code flow (``access_token``), for tests that need a token but
not the MCP SDK's client; ``sdk_auth`` is the official MCP SDK's OAuth client (an
``httpx2.Auth``) for one person, whose consent it drives the same way. Tests that cannot
have the provider skip, saying why.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import urllib.parse
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
import trio
from joserfc.jwk import KeySet
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from tests.support.paths import REPO, SERVERS

NODE_MODULES = REPO / ".venv" / "node" / "node_modules"
LAUNCHER = SERVERS / "oidc_provider.mjs"
START_S = 20.0
STOP_S = 5.0
# The provider's own client, for access_token(): public (PKCE only), and its redirect URI is
# read from the Location header, never contacted (port 9, discard).
HARNESS_CLIENT = "harness"
HARNESS_REDIRECT = "http://127.0.0.1:9/callback"
SCOPES = ("mcp:admin", "mcp:peer")


def node() -> str:
    """The Node that runs the provider; skips (saying why) when it or the package is missing."""
    found = shutil.which("node")
    if found is None:
        pytest.skip("oidc-provider needs Node, which is not on PATH")
    if not (NODE_MODULES / "oidc-provider" / "package.json").exists():
        reason = "npm is not on PATH" if shutil.which("npm") is None else ".ci/setup could not install it"
        pytest.skip(f"npm's oidc-provider is not installed: {reason}")
    return found


def pkce_pair() -> tuple[str, str]:
    """A PKCE verifier and its S256 challenge (RFC 7636)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class _Form(HTMLParser):
    """The one form of a login or consent page: where it posts and its fields."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "form":
            self.action = named.get("action")
        elif tag == "input" and named.get("name"):
            self.fields[str(named["name"])] = named.get("value") or ""


@attrs.frozen
class OidcProvider:
    """The running provider: its ``issuer`` (no trailing slash: ``iss`` exactly), its
    discovery document and its process group (``pid``)."""

    issuer: str
    discovery: dict[str, Any]
    pid: int

    @property
    def jwks_uri(self) -> str:
        return str(self.discovery["jwks_uri"])

    async def keys(self) -> KeySet:
        """The provider's public signing keys, read from its ``jwks_uri``."""
        async with httpx2.AsyncClient(timeout=10) as http:
            answer = await http.get(self.jwks_uri)
            answer.raise_for_status()
            return KeySet.import_key_set(answer.json())

    async def browser_sign_in(self, authorization_url: str, person: str) -> str:
        """Sign ``person`` in as a browser would, from ``authorization_url`` (an
        authorization request to this provider): follow its redirects with the cookies it
        sets, fill in the login form with ``person``, allow on the consent page, and
        return the URL it finally redirects to outside itself (the client's redirect
        URI, with ``code`` and ``state``, or an ``error``). A fresh browser each time, so
        two people sign in apart."""
        async with httpx2.AsyncClient(timeout=10, follow_redirects=False) as browser:
            request = browser.build_request("GET", authorization_url)
            for _ in range(20):
                answer = await browser.send(request)
                if answer.is_redirect:
                    target = urllib.parse.urljoin(str(answer.url), answer.headers["location"])
                    if not target.startswith(f"{self.issuer}/"):
                        return target
                    request = browser.build_request("GET", target)
                    continue
                form = _Form()
                form.feed(answer.text)
                if answer.status_code != 200 or form.action is None:
                    raise AssertionError(f"the provider answered {answer.status_code}: {answer.text[:500]}")
                if "login" in form.fields:
                    form.fields["login"] = person
                action = urllib.parse.urljoin(str(answer.url), form.action)
                request = browser.build_request("POST", action, data=form.fields)
        raise AssertionError(f"signing {person} in did not leave the provider after 20 pages")

    async def access_token(self, person: str, resource: str, scope: str = " ".join(SCOPES)) -> str:
        """A real access token for ``person`` and ``resource`` (its ``aud``), through a
        whole PKCE code flow of the provider's own client: a JWT signed by the provider."""
        verifier, challenge = pkce_pair()
        state = secrets.token_urlsafe(16)
        query = {
            "client_id": HARNESS_CLIENT,
            "response_type": "code",
            "redirect_uri": HARNESS_REDIRECT,
            "scope": scope,
            "resource": resource,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
        }
        authorization = f"{self.discovery['authorization_endpoint']}?{urllib.parse.urlencode(query)}"
        redirected = urllib.parse.urlsplit(await self.browser_sign_in(authorization, person))
        answered = dict(urllib.parse.parse_qsl(redirected.query))
        assert answered.get("state") == state and "code" in answered, answered
        form = {
            "grant_type": "authorization_code",
            "code": answered["code"],
            "redirect_uri": HARNESS_REDIRECT,
            "code_verifier": verifier,
            "client_id": HARNESS_CLIENT,
            "resource": resource,
        }
        async with httpx2.AsyncClient(timeout=10) as http:
            tokens = await http.post(str(self.discovery["token_endpoint"]), data=form)
        assert tokens.status_code == 200, tokens.text
        token: str = tokens.json()["access_token"]
        return token


@attrs.define
class _Kept:
    """The SDK client's token storage: in memory, for one test."""

    tokens: OAuthToken | None = None
    client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def sdk_auth(provider: OidcProvider, server_url: str, person: str) -> OAuthClientProvider:
    """The official MCP SDK's OAuth client for ``server_url`` (an ``httpx2.Auth``): on a 401
    it finds the provider from the resource's metadata, registers itself, and signs
    ``person`` in with PKCE; the redirect it is sent to is followed here by
    ``browser_sign_in`` (its redirect URI is read, never contacted)."""
    redirected: list[str] = []

    async def redirect(authorization_url: str) -> None:
        redirected.append(await provider.browser_sign_in(authorization_url, person))

    async def callback() -> AuthorizationCodeResult:
        answered = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(redirected.pop()).query))
        assert "code" in answered, f"the provider did not give {person} a code: {answered}"
        return AuthorizationCodeResult(
            code=answered["code"], state=answered.get("state"), iss=answered.get("iss")
        )

    metadata = OAuthClientMetadata(
        client_name=f"sdk client of {person}",
        redirect_uris=[HARNESS_REDIRECT],  # type: ignore[list-item]  # pydantic parses the str
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    return OAuthClientProvider(server_url, metadata, _Kept(), redirect, callback)


async def _stop_group(process: trio.Process) -> None:
    """SIGTERM to the provider's process group, SIGKILL if it lingers."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        with trio.move_on_after(STOP_S):
            await process.wait()
            return


async def _issuer_line(stream: trio.abc.ReceiveStream, log: Path) -> str:
    """The issuer from the launcher's ``listening <issuer>`` line."""
    seen = b""
    while b"\n" not in seen:
        chunk = await stream.receive_some(4096)
        if not chunk:
            said = await trio.Path(log).read_text()
            raise AssertionError(f"oidc-provider exited before it listened: {said}")
        seen += chunk
    line = seen.split(b"\n", 1)[0].decode()
    assert line.startswith("listening http://127.0.0.1:"), line
    return line.removeprefix("listening ")


@asynccontextmanager
async def oidc_provider(
    folder: Path, *, scopes: Sequence[str] = SCOPES, access_token_ttl_s: int = 600, backdate_s: int = 0
) -> AsyncIterator[OidcProvider]:
    """oidc-provider running for the block, offering ``scopes`` for every resource and
    access tokens that last ``access_token_ttl_s``, issued as if ``backdate_s`` ago (so
    expired at once when that is longer); its settings and log in ``folder``."""
    command = node()
    settings = folder / "oidc-provider.json"
    harness = {
        "client_id": HARNESS_CLIENT,
        "redirect_uris": [HARNESS_REDIRECT],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code"],
        "response_types": ["code"],
    }
    settings.write_text(
        json.dumps(
            {
                "scopes": list(scopes),
                "access_token_ttl_s": access_token_ttl_s,
                "backdate_s": backdate_s,
                "clients": [harness],
            }
        )
    )
    log = folder / "oidc-provider.log"
    with log.open("wb") as stderr:
        async with _running([command, str(LAUNCHER), str(settings), str(NODE_MODULES)], stderr) as process:
            assert process.stdout is not None
            with trio.fail_after(START_S):
                issuer = await _issuer_line(process.stdout, log)
                async with httpx2.AsyncClient(timeout=10) as http:
                    found = await http.get(f"{issuer}/.well-known/openid-configuration")
            assert found.status_code == 200, found.text
            yield OidcProvider(issuer, found.json(), process.pid)


@asynccontextmanager
async def _running(command: list[str], stderr: Any) -> AsyncIterator[trio.Process]:
    """``command`` in a process group of its own for the block, its stdout a pipe."""
    run = functools.partial(
        trio.run_process,
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        start_new_session=True,
        check=False,
        deliver_cancel=_stop_group,
    )
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(run)
        try:
            yield process
        finally:
            nursery.cancel_scope.cancel()
