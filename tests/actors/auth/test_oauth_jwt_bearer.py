"""The workload-identity JWT-bearer grant (RFC 7523; actors/auth/jwt_bearer.py) against a
scripted authorization server on an ``httpx2.MockTransport``: the platform's assertion
(a value, or a file read again for every grant) goes as the grant's ``assertion``, no
person involved; a refusal is final (no retry, no other grant) and names no secret."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import httpx2
import pytest

from actors.auth.grants import JWT_BEARER_GRANT
from actors.auth.provider import MemoryVault, OAuthProvider, OAuthSettings
from actors.transport_errors import AuthRequired
from supervisor.cli.conformance_client import CLIENT_METADATA_URL, oauth_settings
from tests.actors.auth.test_oauth_provider import AS, MCP, discovery

ASSERTION = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ3b3JrbG9hZCJ9.planted-assertion-signature"


class WorkloadAS:
    """PRM, metadata (jwt-bearer only, public clients) and a token endpoint that grants
    a token for an accepted assertion and refuses every other with ``refusal``."""

    def __init__(self, accepted: tuple[str, ...] = (ASSERTION,), refusal: str = "invalid_grant") -> None:
        self.accepted = accepted
        self.refusal = refusal
        self.forms: list[dict[str, str]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        methods = {"token_endpoint_auth_methods_supported": ["none"]}
        found = discovery(url, {"grant_types_supported": [JWT_BEARER_GRANT], **methods})
        if found is not None:
            return found
        if url == f"{AS}/token":
            form = dict(parse_qsl(request.content.decode()))
            self.forms.append(form)
            if form.get("assertion") not in self.accepted:
                refusal = {"error": self.refusal, "error_description": form.get("assertion")}
                return httpx2.Response(400, json=refusal)
            return httpx2.Response(200, json={
                "access_token": f"at-{len(self.forms)}", "token_type": "Bearer", "expires_in": 60,
            })  # fmt: skip
        return httpx2.Response(404)


def provider(server: WorkloadAS, clock: list[float], **settings: str) -> OAuthProvider:
    settings = {"flow": "jwt_bearer", "client_id": "workload", **settings}
    return OAuthProvider(
        "docs", MCP, OAuthSettings.from_mapping(settings), MemoryVault(),
        clock=lambda: clock[0], transport=httpx2.MockTransport(server),
    )  # fmt: skip


async def test_the_configured_assertion_is_the_grant_without_a_person() -> None:
    server = WorkloadAS()
    oauth = provider(server, [1000.0], assertion=ASSERTION)
    await oauth.unauthorized(None, None)
    assert server.forms == [
        {"grant_type": JWT_BEARER_GRANT, "assertion": ASSERTION, "resource": MCP, "client_id": "workload"}
    ]
    assert oauth.authorization() == "Bearer at-1"


async def test_the_assertion_file_is_read_again_for_every_grant(tmp_path: Path) -> None:
    """Platforms rotate the token in place: an expired access token is re-granted with
    what the file holds then."""
    token_file = tmp_path / "token"
    token_file.write_text("eyJ.first.sig\n")
    server, clock = WorkloadAS(accepted=("eyJ.first.sig", "eyJ.second.sig")), [1000.0]
    oauth = provider(server, clock, assertion_file=str(token_file))
    await oauth.unauthorized(None, None)
    token_file.write_text("eyJ.second.sig\n")
    clock[0] += 60
    await oauth.prepare()
    assert [f["assertion"] for f in server.forms] == ["eyJ.first.sig", "eyJ.second.sig"]
    assert oauth.authorization() == "Bearer at-2"


@pytest.mark.parametrize("refusal", ["invalid_grant", "invalid_scope", "unauthorized_client"])
async def test_a_refused_assertion_fails_once_and_names_no_secret(
    refusal: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Planted secret: the assertion is in no log record and no error text; the grant is
    neither retried nor swapped for another one."""
    caplog.set_level(logging.DEBUG)
    server = WorkloadAS(accepted=(), refusal=refusal)
    oauth = provider(server, [1000.0], assertion=ASSERTION)
    with pytest.raises(AuthRequired) as caught:
        await oauth.unauthorized(None, None)
    assert caught.value.needs_login
    assert f"the token request was refused: HTTP 400 ({refusal})" in str(caught.value)
    assert [f["grant_type"] for f in server.forms] == [JWT_BEARER_GRANT]
    shown = [str(caught.value)] + [repr(r.__dict__) + r.getMessage() for r in caplog.records]
    assert caplog.records and not [text for text in shown if ASSERTION in text or "planted" in text]


@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "cannot be read (No such file or directory)"), ("\n", "is empty"), ("é", "is not a JWT")],
)
async def test_an_unusable_assertion_file_is_named(tmp_path: Path, content: str | None, problem: str) -> None:
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_text(content)
    server = WorkloadAS()
    with pytest.raises(AuthRequired) as caught:
        await provider(server, [0.0], assertion_file=str(token_file)).unauthorized(None, None)
    assert f"no workload identity: the assertion_file {token_file} {problem}" in str(caught.value)
    assert server.forms == []


def test_conformance_scenarios_map_to_the_jwt_bearer_and_cross_app_flows() -> None:
    context: dict[str, Any] = {"client_id": "conformance-wif-workload", "valid_jwt": "eyJ.v.s",
                               "wrong_audience_jwt": "eyJ.w.s", "expired_jwt": "eyJ.e.s"}  # fmt: skip
    assert oauth_settings("auth/wif-jwt-bearer", context) == {
        "client_metadata_url": CLIENT_METADATA_URL, "client_id": "conformance-wif-workload",
        "assertion": "eyJ.v.s", "flow": "jwt_bearer",
    }  # fmt: skip
    enterprise = {"client_id": "c", "client_secret": "s", "idp_client_id": "i", "idp_id_token": "t",
                  "idp_token_endpoint": "https://idp/token"}  # fmt: skip
    assert oauth_settings("auth/enterprise-managed-authorization", enterprise) == {
        "client_metadata_url": CLIENT_METADATA_URL, "client_id": "c", "client_secret": "s",
        "idp_client_id": "i", "id_token": "t", "idp_token_endpoint": "https://idp/token",
        "flow": "cross_app_access",
    }  # fmt: skip
