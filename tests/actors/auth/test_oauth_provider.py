"""The OAuth provider alone, against a scripted authorization server on an
``httpx2.MockTransport`` and an injected clock: cross-app access (SEP-990), expiry,
headless re-grants, and concurrent 401s renewing once."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import httpx2
import pytest
import trio

from actors.auth.grants import ID_JAG_TYPE, ID_TOKEN_TYPE, JWT_BEARER_GRANT, TOKEN_EXCHANGE
from actors.auth.http import MAX_METADATA_BYTES
from actors.auth.provider import MemoryVault, OAuthProvider, OAuthSettings
from actors.log_events import event_name
from actors.transport_errors import AuthRequired

MCP = "https://mcp.example/mcp"
AS = "https://as.example"
IDP = "https://idp.example"


def discovery(url: str, metadata: dict[str, Any]) -> httpx2.Response | None:
    """The PRM (naming AS) and AS's ``metadata`` (issuer and token endpoint added), or
    None for another URL."""
    if url == "https://mcp.example/.well-known/oauth-protected-resource/mcp":
        return httpx2.Response(200, json={"resource": MCP, "authorization_servers": [AS]})
    if url == f"{AS}/.well-known/oauth-authorization-server":
        return httpx2.Response(200, json={"issuer": AS, "token_endpoint": f"{AS}/token", **metadata})
    return None


class Scripted:
    """PRM + AS metadata + token endpoints; records the token requests."""

    def __init__(self, expires_in: int = 3600) -> None:
        self.forms: list[dict[str, str]] = []
        self.headers: list[httpx2.Headers] = []
        self.expires_in = expires_in
        self.issued = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        found = discovery(url, {
            "authorization_endpoint": f"{AS}/authorize", "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        })  # fmt: skip
        if found is not None:
            return found
        if url in (f"{AS}/token", f"{IDP}/token"):
            form = dict(parse_qsl(request.content.decode()))
            self.forms.append(form)
            self.headers.append(request.headers)
            if url == f"{IDP}/token":
                return httpx2.Response(200, json={
                    "access_token": "jag-1", "issued_token_type": ID_JAG_TYPE, "token_type": "N_A",
                })  # fmt: skip
            self.issued += 1
            return httpx2.Response(200, json={
                "access_token": f"at-{self.issued}", "token_type": "Bearer", "expires_in": self.expires_in,
            })  # fmt: skip
        return httpx2.Response(404)


def provider(script: Scripted, clock: list[float], **settings: str) -> OAuthProvider:
    return OAuthProvider(
        "docs", MCP, OAuthSettings.from_mapping(settings), MemoryVault(),
        clock=lambda: clock[0], transport=httpx2.MockTransport(script),
    )  # fmt: skip


CROSS_APP = {
    "flow": "cross_app_access", "client_id": "app", "client_secret": "s3cret",
    "idp_token_endpoint": f"{IDP}/token", "idp_client_id": "idp-app", "id_token": "eyJ.id.token",
}  # fmt: skip


async def test_cross_app_access_exchanges_the_id_token_then_presents_the_id_jag() -> None:
    script, clock = Scripted(), [1000.0]
    oauth = provider(script, clock, **CROSS_APP)
    await oauth.unauthorized(None, 'Bearer error="invalid_token"')
    exchange, grant = script.forms
    assert exchange == {
        "grant_type": TOKEN_EXCHANGE, "requested_token_type": ID_JAG_TYPE, "subject_token": "eyJ.id.token",
        "subject_token_type": ID_TOKEN_TYPE, "audience": AS, "resource": MCP, "client_id": "idp-app",
    }  # fmt: skip
    assert grant["grant_type"] == JWT_BEARER_GRANT and grant["assertion"] == "jag-1"
    assert script.headers[1]["authorization"].startswith("Basic ")  # the AS's client, by basic
    assert oauth.authorization() == "Bearer at-1"


async def test_a_headless_flow_runs_again_when_the_token_expired() -> None:
    script, clock = Scripted(expires_in=60), [1000.0]
    oauth = provider(script, clock, flow="client_credentials", client_id="svc", client_secret="x")
    await oauth.unauthorized(None, None)
    await oauth.prepare()
    assert len(script.forms) == 1  # still valid: nothing asked
    clock[0] += 45  # inside the leeway before expiry (a quarter of a 60 s life: 15 s)
    await oauth.prepare()
    assert [f["grant_type"] for f in script.forms] == ["client_credentials", "client_credentials"]
    assert oauth.authorization() == "Bearer at-2"


async def test_concurrent_401s_with_the_same_token_renew_once() -> None:
    script, clock = Scripted(), [1000.0]
    oauth = provider(script, clock, flow="client_credentials", client_id="svc", client_secret="x")
    await oauth.unauthorized(None, None)
    used = oauth.authorization()
    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(oauth.unauthorized, used, None)
    assert len(script.forms) == 2 and oauth.authorization() == "Bearer at-2"


async def test_after_a_refused_fresh_token_every_401_fails_at_once() -> None:
    script, clock = Scripted(), [1000.0]
    oauth = provider(script, clock, flow="client_credentials", client_id="svc", client_secret="x")
    await oauth.unauthorized(None, None)
    oauth.refused()
    with pytest.raises(AuthRequired) as caught:
        await oauth.unauthorized(oauth.authorization(), None)
    assert caught.value.needs_login and "refused a fresh token" in str(caught.value)
    assert len(script.forms) == 1  # no token storm
    await oauth.prepare()  # a new attempt (a restart) may try again
    await oauth.unauthorized(oauth.authorization(), None)
    assert len(script.forms) == 2


@pytest.mark.parametrize("missing", ["idp_token_endpoint", "id_token"])
async def test_cross_app_access_without_its_settings_says_what_is_missing(missing: str) -> None:
    settings: dict[str, Any] = {k: v for k, v in CROSS_APP.items() if k != missing}
    oauth = provider(Scripted(), [0.0], **settings)
    with pytest.raises(AuthRequired) as caught:
        await oauth.unauthorized(None, None)
    assert '"idp_token_endpoint" and "id_token"' in str(caught.value)
    assert settings["client_secret"] not in str(caught.value)  # quoted or not


class BrokenVault:
    async def load(self, server: str, url: str) -> None:
        raise OSError("disk I/O error")

    async def save(self, server: str, url: str, record: Any) -> None:
        raise OSError("disk I/O error")


async def test_a_failing_store_costs_persistence_not_the_server(caplog: pytest.LogCaptureFixture) -> None:
    script, clock = Scripted(), [1000.0]
    oauth = OAuthProvider(
        "docs", MCP, OAuthSettings.from_mapping({"flow": "client_credentials", "client_id": "svc",
                                                 "client_secret": "x"}),
        BrokenVault(), clock=lambda: clock[0], transport=httpx2.MockTransport(script),
    )  # fmt: skip
    await oauth.prepare()
    await oauth.unauthorized(None, None)
    assert oauth.authorization() == "Bearer at-1"
    messages = [event_name(r) for r in caplog.records]
    assert "cannot read stored tokens" in messages and "cannot store tokens" in messages


async def test_a_token_that_expires_mid_session_is_renewed_before_it_is_sent() -> None:
    script, clock = Scripted(expires_in=600), [1000.0]
    oauth = provider(script, clock, flow="client_credentials", client_id="svc", client_secret="x")
    await oauth.unauthorized(None, None)
    assert not oauth.expired()
    await oauth.renew()
    assert len(script.forms) == 1  # not expired: nothing asked
    clock[0] += 600
    assert oauth.expired()
    await oauth.renew()
    assert len(script.forms) == 2 and oauth.authorization() == "Bearer at-2" and not oauth.expired()


async def test_an_oversized_metadata_document_is_not_read_to_its_end() -> None:
    """An authorization server is untrusted: past MAX_METADATA_BYTES its answer counts as
    absent, and the rest of it is never read (here: a 100 MB metadata document)."""
    chunk = b" " * 65536
    sent: list[int] = []  # chunks read, per document

    class Huge(httpx2.AsyncByteStream):
        async def __aiter__(self) -> Any:
            sent.append(0)
            for _ in range(1600):
                sent[-1] += 1
                yield chunk

    class Scripted_(Scripted):
        def __call__(self, request: httpx2.Request) -> httpx2.Response:
            if str(request.url).startswith("https://mcp.example/.well-known/"):
                return httpx2.Response(200, stream=Huge())
            return super().__call__(request)

    script, clock = Scripted_(), [1000.0]
    oauth = provider(script, clock, flow="client_credentials", client_id="svc", client_secret="x")
    with pytest.raises(AuthRequired):
        await oauth.unauthorized(None, None)  # no metadata found: no token
    assert sent and max(sent) <= MAX_METADATA_BYTES // len(chunk) + 1  # each given up at the bound
    assert script.forms == []
