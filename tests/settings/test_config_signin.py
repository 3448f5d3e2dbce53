"""The ``signin`` section: what a good one reads as, and each bad value a ``config
error`` naming its place and how to fix it; ``none`` and HMAC algorithms refused at
load; the introspection secret learned as a secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from supervisor.settings.signin import DEFAULT_ALGORITHMS
from tests.settings.test_config_loader import fail, load

I0 = "$.signin.issuers[0]"
I1 = "$.signin.issuers[1]"
ISSUER = {"issuer": "https://idp.example.com/", "tenant_claim": "org"}


def doc(**signin: Any) -> dict[str, Any]:
    return {"servers": {}, "signin": {"resource": "https://mcp.example.com/", "issuers": [ISSUER], **signin}}


def test_a_good_section_and_its_defaults(tmp_path: Path) -> None:
    introspection = {
        "endpoint": "https://idp.example.com/introspect",
        "client_id": "mcp",
        "client_secret": "${env:S}",
    }
    issuer = {**ISSUER, "roles": {"claim": "groups", "operator": ["admins"]}, "introspection": introspection}
    config = load(
        tmp_path,
        doc(issuers=[issuer, {"issuer": "http://127.0.0.1:9/", "tenant": "local"}]),
        {"S": "s3cret-xyz"},
    )
    assert config.signin is not None and config.signin.resource == "https://mcp.example.com"
    first, second = config.signin.issuers
    assert first.algorithms == DEFAULT_ALGORITHMS and first.leeway_s == 30 and first.person_claim == "sub"
    assert first.roles.claim == "groups" and first.roles.operator == ("admins",) and first.jwks_uri is None
    assert second.tenant == "local" and second.tenant_claim is None
    assert "s3cret-xyz" in config.secrets and "s3cret-xyz" not in repr(config)
    assert load(tmp_path, {"servers": {}}).signin is None  # absent: sign-in off


@pytest.mark.parametrize(
    ("signin", "where", "problem"),
    [
        ({"resource": None}, "$.signin", "'resource' is missing"),
        ({"resource": "mcp.example.com"}, "$.signin.resource", "expected this service's public base URL"),
        ({"resource": "http://mcp.example.com"}, "$.signin.resource", '"http://mcp.example.com" is plain'),
        ({"issuers": []}, "$.signin.issuers", "the list is empty"),
        ({"issuers": [{**ISSUER, "algorithms": ["ES256", "none"]}]}, I0 + ".algorithms[1]", "'none' is"),
        ({"issuers": [{**ISSUER, "algorithms": ["HS256"]}]}, I0 + ".algorithms[0]", "'HS256' is refused"),
        ({"issuers": [{**ISSUER, "algorithms": ["RS257"]}]}, I0 + ".algorithms[0]", "unknown algorithm"),
        ({"issuers": [{**ISSUER, "tenant": "acme"}]}, I0, "give exactly one of 'tenant'"),
        ({"issuers": [{"issuer": "https://idp/"}]}, I0, "give exactly one of 'tenant'"),
        ({"issuers": [{"tenant": "a"}]}, I0, "'issuer' is missing"),
        ({"issuers": [ISSUER, ISSUER]}, I1 + ".issuer", "issuer 'https://idp.example.com/' is listed"),
        ({"issuers": [{**ISSUER, "leeway_s": -1}]}, I0 + ".leeway_s", "expected a number of at"),
        ({"issuers": [{**ISSUER, "jwks": "x"}]}, I0, "unknown key 'jwks' (did you mean 'jwks_uri"),
        ({"issuers": [{**ISSUER, "introspection": {"endpoint": "https://i/"}}]}, I0 + ".introspection",
         "'client_id' is missing"),
        ({"issuers": [{**ISSUER, "roles": {"operator": "x"}}]}, I0 + ".roles.operator", "expected a list"),
    ],
)  # fmt: skip
def test_a_bad_value_is_a_config_error_naming_it(
    tmp_path: Path, signin: dict[str, Any], where: str, problem: str
) -> None:
    section = doc(**signin)
    if signin.get("resource", "") is None:
        del section["signin"]["resource"]
    error = fail(tmp_path, section)
    assert error.json_path == where, error
    assert error.problem.startswith(problem), error.problem
