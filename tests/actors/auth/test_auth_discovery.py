"""Unit tests of the pure OAuth discovery functions (actors/auth/discovery.py).

The URL orders are the MCP authorization spec's (2025-06-18 and later): protected-resource
metadata (RFC 9728) from the challenge's ``resource_metadata`` first, then the path-aware
well-known URL, then the root one; authorization-server metadata for an issuer with a path
by RFC 8414 path insertion, OpenID Connect path insertion, OpenID Connect path appending;
without a path RFC 8414, then OpenID Connect.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.auth.discovery import (
    OFFLINE_ACCESS,
    Challenge,
    DiscoveryError,
    ResourceMetadata,
    ServerMetadata,
    canonical_resource,
    legacy_endpoints,
    legacy_metadata_url,
    merge_scopes,
    parse_challenge,
    pick_auth_method,
    resource_allowed,
    resource_metadata_urls,
    select_scope,
    server_metadata_urls,
)
from actors.redaction import safe_url

# --- parse_challenge ---------------------------------------------------------------------


@pytest.mark.parametrize("header", [None, "", 'Basic realm="x"', "Bearerx realm=1", 'DPoPx algs="ES256"'])
def test_no_bearer_challenge_is_none(header: str | None) -> None:
    assert parse_challenge(header) is None


@pytest.mark.parametrize(
    "header",
    [
        'DPoP error="use_dpop_nonce", resource_metadata="https://m/prm"',
        'DPoP algs="ES256" error="use_dpop_nonce", Bearer resource_metadata="https://m/prm"',
        'Basic realm="x", Bearer resource_metadata="https://m/prm", DPoP error="use_dpop_nonce"',
    ],
)
def test_a_dpop_challenge_counts_and_merges_with_a_bearer_one(header: str) -> None:
    challenge = parse_challenge(header)
    assert challenge is not None
    assert challenge.error == "use_dpop_nonce" and challenge.resource_metadata == "https://m/prm"


def test_bare_bearer_has_no_params() -> None:
    challenge = parse_challenge("Bearer")
    assert challenge == Challenge({})
    assert challenge.resource_metadata is None
    assert challenge.scope is None
    assert challenge.error is None
    assert not challenge.insufficient_scope


def test_full_challenge_quoted_values() -> None:
    challenge = parse_challenge(
        'Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp", '
        'scope="files:read files:write", error="insufficient_scope", error_description="need more"'
    )
    assert challenge is not None
    assert challenge.resource_metadata == "https://mcp.example/.well-known/oauth-protected-resource/mcp"
    assert challenge.scope == "files:read files:write"
    assert challenge.error == "insufficient_scope"
    assert challenge.insufficient_scope
    assert challenge.params["error_description"] == "need more"


def test_bare_token_values_including_a_url() -> None:
    challenge = parse_challenge(
        "Bearer resource_metadata=https://mcp.example/.well-known/oauth-protected-resource,"
        "error=invalid_token"
    )
    assert challenge is not None
    assert challenge.resource_metadata == "https://mcp.example/.well-known/oauth-protected-resource"
    assert challenge.error == "invalid_token"
    assert not challenge.insufficient_scope


def test_scheme_and_param_names_are_case_insensitive() -> None:
    challenge = parse_challenge('bEaReR Resource_Metadata="https://a.example/m", SCOPE=read')
    assert challenge is not None
    assert challenge.resource_metadata == "https://a.example/m"
    assert challenge.scope == "read"


def test_whitespace_around_equals_and_commas() -> None:
    challenge = parse_challenge('Bearer  realm = "r" ,  scope =  "a b"  , error=invalid_token')
    assert challenge is not None
    assert dict(challenge.params) == {"realm": "r", "scope": "a b", "error": "invalid_token"}


def test_escaped_quotes_and_backslashes_are_unescaped() -> None:
    challenge = parse_challenge(r'Bearer error_description="say \"hi\" \\ bye", scope="a"')
    assert challenge is not None
    assert challenge.params["error_description"] == 'say "hi" \\ bye'
    assert challenge.scope == "a"


def test_first_occurrence_of_a_param_wins() -> None:
    challenge = parse_challenge('Bearer scope="first", scope="second"')
    assert challenge is not None
    assert challenge.scope == "first"


def test_bearer_after_other_schemes() -> None:
    challenge = parse_challenge('Basic realm="basic-realm", Bearer scope="a b", error=insufficient_scope')
    assert challenge is not None
    assert dict(challenge.params) == {"scope": "a b", "error": "insufficient_scope"}
    assert parse_challenge("Negotiate, Bearer scope=x") == Challenge({"scope": "x"})


def test_a_following_scheme_ends_the_bearer_challenge() -> None:
    challenge = parse_challenge('Bearer realm="mcp", scope="a", Basic realm="other", charset="UTF-8"')
    assert challenge is not None
    assert dict(challenge.params) == {"realm": "mcp", "scope": "a"}


def test_a_following_scheme_without_params_ends_it_too() -> None:
    challenge = parse_challenge('Bearer scope="a", Negotiate')
    assert challenge == Challenge({"scope": "a"})


def test_bearer_inside_another_schemes_quoted_realm_is_not_a_challenge() -> None:
    assert parse_challenge('Basic realm="legacy, Bearer tokens go elsewhere"') is None
    challenge = parse_challenge('Basic realm="x, Bearer scope=evil", Bearer scope="real"')
    assert challenge == Challenge({"scope": "real"})


def test_garbage_after_params_keeps_what_was_understood() -> None:
    challenge = parse_challenge('Bearer scope="a", ??? !!!')
    assert challenge == Challenge({"scope": "a"})


@pytest.mark.parametrize("scope", ['""', '"   "'])
def test_blank_scope_is_none(scope: str) -> None:
    challenge = parse_challenge(f"Bearer scope={scope}")
    assert challenge is not None
    assert "scope" in challenge.params
    assert challenge.scope is None


@given(st.text())
def test_parse_challenge_never_raises(header: str) -> None:
    result = parse_challenge(header)
    assert result is None or isinstance(result, Challenge)


@given(st.text(max_size=40).map(lambda t: "Bearer " + t))
def test_parse_challenge_never_raises_after_bearer(header: str) -> None:
    result = parse_challenge(header)
    assert isinstance(result, Challenge)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in result.params.items())


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@given(st.text(), st.sampled_from(["", 'Basic realm="b, Bearer no", ', "Negotiate, "]))
def test_quoted_value_round_trips(value: str, before: str) -> None:
    header = f'{before}Bearer error_description={_quote(value)}, error="insufficient_scope"'
    challenge = parse_challenge(header)
    assert challenge is not None
    assert challenge.params["error_description"] == value
    assert challenge.error == "insufficient_scope"


@given(st.text(alphabet='ab"\\ ,=', min_size=1, max_size=12))
def test_quoted_value_with_quotes_and_backslashes_round_trips(value: str) -> None:
    challenge = parse_challenge(f"Bearer scope={_quote(value)}")
    assert challenge is not None
    assert challenge.params["scope"] == value


# --- resource_metadata_urls --------------------------------------------------------------


def test_prm_urls_hint_then_path_then_root() -> None:
    challenge = Challenge({"resource_metadata": "https://meta.example/prm"})
    assert resource_metadata_urls("https://mcp.example/public/mcp", challenge) == [
        "https://meta.example/prm",
        "https://mcp.example/.well-known/oauth-protected-resource/public/mcp",
        "https://mcp.example/.well-known/oauth-protected-resource",
    ]


def test_prm_urls_without_a_challenge() -> None:
    assert resource_metadata_urls("https://mcp.example/mcp", None) == [
        "https://mcp.example/.well-known/oauth-protected-resource/mcp",
        "https://mcp.example/.well-known/oauth-protected-resource",
    ]
    assert resource_metadata_urls("https://mcp.example/mcp", Challenge({"scope": "x"})) == [
        "https://mcp.example/.well-known/oauth-protected-resource/mcp",
        "https://mcp.example/.well-known/oauth-protected-resource",
    ]


@pytest.mark.parametrize("url", ["https://mcp.example", "https://mcp.example/"])
def test_prm_urls_without_a_path_only_root(url: str) -> None:
    assert resource_metadata_urls(url, None) == ["https://mcp.example/.well-known/oauth-protected-resource"]


def test_prm_urls_keep_port_drop_trailing_slash_query_and_fragment() -> None:
    assert resource_metadata_urls("http://127.0.0.1:8123/a/b/?x=1#f", None) == [
        "http://127.0.0.1:8123/.well-known/oauth-protected-resource/a/b",
        "http://127.0.0.1:8123/.well-known/oauth-protected-resource",
    ]


def test_prm_hint_equal_to_a_well_known_url_is_not_repeated() -> None:
    hint = "https://mcp.example/.well-known/oauth-protected-resource"
    assert resource_metadata_urls("https://mcp.example/mcp", Challenge({"resource_metadata": hint})) == [
        hint,
        "https://mcp.example/.well-known/oauth-protected-resource/mcp",
    ]


@pytest.mark.parametrize(
    "hint", ["ftp://mcp.example/prm", "file:///etc/passwd", "javascript:alert(1)", "/relative"]
)
def test_prm_hint_must_be_http(hint: str) -> None:
    with pytest.raises(DiscoveryError, match="not an http"):
        resource_metadata_urls("https://mcp.example/mcp", Challenge({"resource_metadata": hint}))


@pytest.mark.parametrize("url", ["ws://mcp.example/mcp", "mcp.example/mcp", "https://", ""])
def test_prm_server_url_must_be_http(url: str) -> None:
    with pytest.raises(DiscoveryError):
        resource_metadata_urls(url, None)


def test_a_url_that_does_not_even_parse_is_a_discovery_error_not_a_crash() -> None:
    # urlsplit raises ValueError for these; a server's bad URL must fail discovery, cleanly
    with pytest.raises(DiscoveryError, match="not a usable URL"):
        resource_metadata_urls("https://mcp.example/mcp", Challenge({"resource_metadata": "http://[x"}))
    with pytest.raises(DiscoveryError, match="not a usable URL"):
        ServerMetadata.parse({"token_endpoint": "http://[x/token"}, "https://x")


# --- server_metadata_urls ----------------------------------------------------------------


def test_as_urls_with_a_path_in_the_spec_order() -> None:
    assert server_metadata_urls("https://auth.example/tenant1") == [
        "https://auth.example/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example/.well-known/openid-configuration/tenant1",
        "https://auth.example/tenant1/.well-known/openid-configuration",
    ]


def test_as_urls_with_a_deep_path_and_trailing_slash() -> None:
    assert server_metadata_urls("https://auth.example:8443/realms/mcp/") == [
        "https://auth.example:8443/.well-known/oauth-authorization-server/realms/mcp",
        "https://auth.example:8443/.well-known/openid-configuration/realms/mcp",
        "https://auth.example:8443/realms/mcp/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize("issuer", ["https://auth.example", "https://auth.example/"])
def test_as_urls_without_a_path(issuer: str) -> None:
    assert server_metadata_urls(issuer) == [
        "https://auth.example/.well-known/oauth-authorization-server",
        "https://auth.example/.well-known/openid-configuration",
    ]


def test_as_urls_refuse_non_http_issuer() -> None:
    with pytest.raises(DiscoveryError):
        server_metadata_urls("urn:example:issuer")


# --- canonical_resource / resource_allowed -----------------------------------------------


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("HTTPS://MCP.Example.COM/MCP/", "https://mcp.example.com/MCP"),
        ("https://mcp.example.com/", "https://mcp.example.com"),
        ("https://mcp.example.com", "https://mcp.example.com"),
        ("https://mcp.example.com/mcp#frag", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/mcp?tenant=a", "https://mcp.example.com/mcp?tenant=a"),
        ("http://localhost:8080/a/b//", "http://localhost:8080/a/b"),
    ],
)
def test_canonical_resource(url: str, canonical: str) -> None:
    assert canonical_resource(url) == canonical


@pytest.mark.parametrize(
    ("server", "resource"),
    [
        ("https://mcp.example/mcp", "https://mcp.example/mcp"),
        ("https://mcp.example/mcp", "https://mcp.example/mcp/"),
        ("https://mcp.example/mcp/", "https://MCP.example/mcp"),
        ("https://mcp.example/api/mcp", "https://mcp.example/api"),
        ("https://mcp.example/api/mcp", "https://mcp.example"),
        ("https://mcp.example/api/mcp", "https://mcp.example/"),
        ("https://mcp.example/mcp#x", "https://mcp.example/mcp"),
    ],
)
def test_resource_allowed(server: str, resource: str) -> None:
    assert resource_allowed(server, resource)


@pytest.mark.parametrize(
    ("server", "resource"),
    [
        ("https://mcp.example/mcp", "https://other.example/mcp"),
        ("https://mcp.example/mcp", "http://mcp.example/mcp"),
        ("https://mcp.example/mcp", "https://mcp.example:8443/mcp"),
        ("https://mcp.example/mcp", "https://mcp.example/mcp/sub"),
        ("https://mcp.example/mcpfoo", "https://mcp.example/mcp"),
        ("https://mcp.example/api/mcp", "https://mcp.example/other"),
        ("https://mcp.example/", "https://mcp.example/mcp"),
        ("https://mcp.example/mcp", "https://mcp.example.evil/mcp"),
    ],
)
def test_resource_not_allowed(server: str, resource: str) -> None:
    assert not resource_allowed(server, resource)


# --- legacy (2025-03-26) -----------------------------------------------------------------


def test_legacy_endpoints_at_the_origin() -> None:
    assert legacy_endpoints("https://mcp.example:8443/v1/mcp?x=1") == {
        "issuer": "https://mcp.example:8443",
        "authorization_endpoint": "https://mcp.example:8443/authorize",
        "token_endpoint": "https://mcp.example:8443/token",
        "registration_endpoint": "https://mcp.example:8443/register",
    }


def test_legacy_metadata_url_ignores_the_path() -> None:
    assert legacy_metadata_url("http://127.0.0.1:9000/deep/mcp/") == (
        "http://127.0.0.1:9000/.well-known/oauth-authorization-server"
    )
    assert legacy_metadata_url("https://mcp.example") == (
        "https://mcp.example/.well-known/oauth-authorization-server"
    )


def test_legacy_refuse_non_http() -> None:
    with pytest.raises(DiscoveryError):
        legacy_endpoints("stdio://x")
    with pytest.raises(DiscoveryError):
        legacy_metadata_url("stdio://x")


def test_safe_drops_userinfo_query_and_fragment() -> None:
    assert safe_url("https://user:secret@as.example/p?code=abc#f") == "https://as.example/p"


# --- ResourceMetadata.parse --------------------------------------------------------------


def test_resource_metadata_parse() -> None:
    meta = ResourceMetadata.parse(
        {
            "resource": "https://mcp.example/mcp",
            "authorization_servers": ["https://auth.example", "https://auth2.example/t"],
            "scopes_supported": ["a", 7, "b"],
            "bearer_methods_supported": ["header"],
        },
        "https://mcp.example/.well-known/oauth-protected-resource",
    )
    assert meta == ResourceMetadata(
        "https://mcp.example/mcp", ("https://auth.example", "https://auth2.example/t"), ("a", "b")
    )


@pytest.mark.parametrize("scopes", [None, "a b", {"a": 1}])
def test_resource_metadata_scopes_not_a_list(scopes: object) -> None:
    body = {"resource": "https://r.example", "authorization_servers": ["https://a.example"]}
    if scopes is not None:
        body["scopes_supported"] = scopes
    assert ResourceMetadata.parse(body, "https://r.example/x").scopes_supported is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "not a JSON object"),
        ("text", "not a JSON object"),
        (None, "not a JSON object"),
        ({"authorization_servers": ["https://a.example"]}, "no resource"),
        ({"resource": "", "authorization_servers": ["https://a.example"]}, "no resource"),
        ({"resource": 5, "authorization_servers": ["https://a.example"]}, "no resource"),
        ({"resource": "https://r.example"}, "no authorization_servers"),
        ({"resource": "https://r.example", "authorization_servers": []}, "no authorization_servers"),
        ({"resource": "https://r.example", "authorization_servers": "https://a"}, "no authorization_servers"),
        ({"resource": "https://r.example", "authorization_servers": [1]}, "no authorization_servers"),
    ],
)
def test_resource_metadata_refused(body: object, message: str) -> None:
    with pytest.raises(DiscoveryError, match=message) as info:
        ResourceMetadata.parse(body, "https://u:pw@r.example/prm?q=secret")
    assert "pw" not in str(info.value)
    assert "secret" not in str(info.value)
    assert "https://r.example/prm" in str(info.value)


# --- ServerMetadata.parse / check_pkce ---------------------------------------------------

FULL_AS = {
    "issuer": "https://auth.example",
    "authorization_endpoint": "https://auth.example/authorize",
    "token_endpoint": "https://auth.example/token",
    "registration_endpoint": "https://auth.example/register",
    "scopes_supported": ["openid", "offline_access"],
    "grant_types_supported": ["authorization_code", "refresh_token"],
    "code_challenge_methods_supported": ["S256"],
    "token_endpoint_auth_methods_supported": ["client_secret_post", "none"],
    "client_id_metadata_document_supported": True,
}


def test_server_metadata_parse_all_fields() -> None:
    meta = ServerMetadata.parse(FULL_AS, "https://auth.example/.well-known/oauth-authorization-server")
    assert meta == ServerMetadata(
        issuer="https://auth.example",
        authorization_endpoint="https://auth.example/authorize",
        token_endpoint="https://auth.example/token",
        registration_endpoint="https://auth.example/register",
        scopes_supported=("openid", "offline_access"),
        grant_types_supported=("authorization_code", "refresh_token"),
        code_challenge_methods_supported=("S256",),
        token_endpoint_auth_methods_supported=("client_secret_post", "none"),
        client_id_metadata_document_supported=True,
    )
    meta.check_pkce()


def test_server_metadata_parse_minimal() -> None:
    meta = ServerMetadata.parse({"token_endpoint": "https://auth.example/token"}, "https://x")
    assert meta.issuer == ""
    assert meta.authorization_endpoint is None
    assert meta.registration_endpoint is None
    assert meta.scopes_supported is None
    assert meta.grant_types_supported is None
    assert meta.code_challenge_methods_supported is None
    assert meta.token_endpoint_auth_methods_supported is None
    assert meta.client_id_metadata_document_supported is False
    meta.check_pkce()  # absent: allowed (we send S256)


@pytest.mark.parametrize("flag", ["true", 1, "yes", None])
def test_cimd_support_only_for_literal_true(flag: object) -> None:
    body = {"token_endpoint": "https://auth.example/token", "client_id_metadata_document_supported": flag}
    assert ServerMetadata.parse(body, "https://x").client_id_metadata_document_supported is False


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (["token_endpoint"], "not a JSON object"),
        ({}, "no token_endpoint"),
        ({"token_endpoint": ""}, "no token_endpoint"),
        ({"token_endpoint": 3}, "no token_endpoint"),
        ({"token_endpoint": "ftp://auth.example/token"}, "not an http"),
        (
            {"token_endpoint": "https://auth.example/token", "authorization_endpoint": "javascript:x"},
            "not an http",
        ),
        (
            {"token_endpoint": "https://auth.example/token", "registration_endpoint": "file:///r"},
            "not an http",
        ),
    ],
)
def test_server_metadata_refused(body: object, message: str) -> None:
    with pytest.raises(DiscoveryError, match=message):
        ServerMetadata.parse(body, "https://auth.example/.well-known/oauth-authorization-server")


def test_server_metadata_non_string_issuer_and_endpoints_ignored() -> None:
    meta = ServerMetadata.parse(
        {"issuer": 5, "token_endpoint": "https://a.example/t", "authorization_endpoint": ["x"]}, "https://x"
    )
    assert meta.issuer == ""
    assert meta.authorization_endpoint is None


@pytest.mark.parametrize("methods", [["S256"], ["plain", "S256"], None])
def test_check_pkce_accepts(methods: list[str] | None) -> None:
    body: dict[str, object] = {"issuer": "https://auth.example", "token_endpoint": "https://auth.example/t"}
    if methods is not None:
        body["code_challenge_methods_supported"] = methods
    ServerMetadata.parse(body, "https://x").check_pkce()


@pytest.mark.parametrize("methods", [["plain"], [], ["s256"]])
def test_check_pkce_refuses_lists_without_s256(methods: list[str]) -> None:
    meta = ServerMetadata.parse(
        {
            "issuer": "https://auth.example/t1",
            "token_endpoint": "https://auth.example/t",
            "code_challenge_methods_supported": methods,
        },
        "https://x",
    )
    with pytest.raises(DiscoveryError, match="S256") as info:
        meta.check_pkce()
    assert "https://auth.example/t1" in str(info.value)


# --- select_scope / merge_scopes ---------------------------------------------------------


def _as(scopes: tuple[str, ...] | None) -> ServerMetadata:
    return ServerMetadata("https://auth.example", None, "https://auth.example/token", scopes_supported=scopes)


def _rs(scopes: tuple[str, ...] | None) -> ResourceMetadata:
    return ResourceMetadata("https://mcp.example/mcp", ("https://auth.example",), scopes)


CHALLENGE = Challenge({"scope": "from:challenge"})


def test_scope_order_configured_first() -> None:
    assert select_scope("conf:a conf:b", CHALLENGE, _rs(("rs:a",)), None) == "conf:a conf:b"


def test_scope_order_challenge_second() -> None:
    assert select_scope(None, CHALLENGE, _rs(("rs:a",)), None) == "from:challenge"
    assert select_scope("", CHALLENGE, _rs(("rs:a",)), None) == "from:challenge"


def test_scope_order_resource_third() -> None:
    assert select_scope(None, None, _rs(("rs:a", "rs:b")), None) == "rs:a rs:b"
    assert select_scope(None, Challenge({"scope": "  "}), _rs(("rs:a",)), None) == "rs:a"
    assert select_scope(None, Challenge({"error": "invalid_token"}), _rs(("rs:a",)), None) == "rs:a"


@pytest.mark.parametrize("resource", [None, _rs(None), _rs(())])
def test_scope_omitted_when_nothing_known(resource: ResourceMetadata | None) -> None:
    assert select_scope(None, None, resource, None) is None
    assert select_scope(None, None, resource, _as(("a", "b"))) is None


def test_offline_access_added_when_the_as_lists_it() -> None:
    assert select_scope("a", None, None, _as(("a", OFFLINE_ACCESS))) == "a offline_access"
    assert select_scope(None, None, None, _as((OFFLINE_ACCESS,))) == "offline_access"
    assert select_scope(None, CHALLENGE, None, _as((OFFLINE_ACCESS,))) == "from:challenge offline_access"


def test_offline_access_not_duplicated() -> None:
    assert select_scope("offline_access a", None, None, _as((OFFLINE_ACCESS,))) == "offline_access a"


def test_offline_access_not_added_without_want_refresh() -> None:
    assert select_scope("a", None, None, _as(("a", OFFLINE_ACCESS)), want_refresh=False) == "a"
    # but a configured one the AS lists is kept
    assert (
        select_scope("a offline_access", None, None, _as((OFFLINE_ACCESS,)), want_refresh=False)
        == "a offline_access"
    )


def test_offline_access_not_added_when_the_as_lists_no_scopes() -> None:
    assert select_scope("a", None, None, _as(None)) == "a"
    assert select_scope("a", None, None, None) == "a"


def test_offline_access_removed_when_the_as_does_not_list_it() -> None:
    assert select_scope("a offline_access", None, None, _as(("a",))) == "a"
    assert select_scope(None, Challenge({"scope": "offline_access x"}), None, _as(("x",))) == "x"
    assert select_scope(None, None, _rs((OFFLINE_ACCESS, "r")), _as(("r",))) == "r"
    assert select_scope("offline_access", None, None, _as(("a",))) is None
    assert select_scope("offline_access a offline_access", None, None, _as(("a",))) == "a"


def test_offline_access_kept_when_the_as_metadata_is_silent() -> None:
    assert select_scope("a offline_access", None, None, _as(None)) == "a offline_access"
    assert select_scope("a offline_access", None, None, None) == "a offline_access"


scope_words = st.lists(st.sampled_from(["a", "b", "c", OFFLINE_ACCESS]), max_size=6)


@given(
    configured=scope_words,
    supported=st.none() | scope_words,
    want_refresh=st.booleans(),
)
def test_offline_access_rules_property(
    configured: list[str], supported: list[str] | None, want_refresh: bool
) -> None:
    server = _as(tuple(supported)) if supported is not None else None
    result = select_scope(" ".join(configured), None, None, server, want_refresh=want_refresh)
    words = (result or "").split()
    if supported is not None and OFFLINE_ACCESS not in supported:
        assert OFFLINE_ACCESS not in words
    elif want_refresh and supported and OFFLINE_ACCESS in supported:
        assert words.count(OFFLINE_ACCESS) == max(1, configured.count(OFFLINE_ACCESS))
    else:
        assert words == configured
    assert [w for w in words if w != OFFLINE_ACCESS] == [w for w in configured if w != OFFLINE_ACCESS]


def test_merge_scopes() -> None:
    assert merge_scopes("a b", "b c", None, "", "a d") == "a b c d"
    assert merge_scopes("  x   y ") == "x y"
    assert merge_scopes(None, "") is None
    assert merge_scopes() is None


# --- pick_auth_method --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preferred", "has_secret", "supported", "has_key", "method"),
    [
        ("client_secret_post", True, ["client_secret_basic"], False, "client_secret_post"),
        ("none", True, None, True, "none"),
        (None, True, None, True, "private_key_jwt"),
        (None, False, ["private_key_jwt"], True, "private_key_jwt"),
        (None, False, None, False, "none"),
        (None, False, ["client_secret_basic"], False, "none"),
        (None, True, None, False, "client_secret_basic"),
        (None, True, ["client_secret_post", "client_secret_basic"], False, "client_secret_basic"),
        (None, True, ["client_secret_post"], False, "client_secret_post"),
        (None, True, ["client_secret_post", "none"], False, "client_secret_post"),
        (None, True, ["private_key_jwt"], False, "client_secret_basic"),
        (None, True, [], False, "client_secret_basic"),
        ("", True, ["client_secret_post"], False, "client_secret_post"),
    ],
)
def test_pick_auth_method(
    preferred: str | None, has_secret: bool, supported: list[str] | None, has_key: bool, method: str
) -> None:
    assert pick_auth_method(preferred, has_secret, supported, has_key) == method


def test_pick_auth_method_key_defaults_false() -> None:
    assert pick_auth_method(None, False, None) == "none"
