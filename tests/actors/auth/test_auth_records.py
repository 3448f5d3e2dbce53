"""Unit tests of the stored OAuth state (actors/auth/records.py): token answers, expiry,
and the JSON round trip of :class:`AuthRecord`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.auth.records import EXPIRY_LEEWAY_S, RECORD_VERSION, AuthRecord, Client, Tokens

NOW = 1_700_000_000.0

# --- Tokens.from_response ----------------------------------------------------------------


def test_from_response_full_answer() -> None:
    tokens = Tokens.from_response(
        {
            "access_token": "at-1",
            "token_type": "Bearer",
            "expires_in": 3600,
            "refresh_token": "rt-1",
            "scope": "a b",
        },
        NOW,
    )
    assert tokens == Tokens("at-1", "Bearer", NOW + 3600, "rt-1", "a b", lifetime=3600)


@pytest.mark.parametrize("token_type", ["bearer", "BEARER", "BeArEr"])
def test_token_type_case_insensitive_and_normalised(token_type: str) -> None:
    tokens = Tokens.from_response({"access_token": "at", "token_type": token_type}, NOW)
    assert tokens.token_type == "Bearer"


@pytest.mark.parametrize("token_type", ["DPoP", "mac", "", "Bearer ", 1, None])
def test_other_token_type_refused(token_type: object) -> None:
    with pytest.raises(ValueError, match="token_type"):
        Tokens.from_response({"access_token": "at", "token_type": token_type}, NOW)


def test_missing_token_type_refused() -> None:
    # RFC 6749 §5.1: token_type is REQUIRED
    with pytest.raises(ValueError, match="token_type"):
        Tokens.from_response({"access_token": "at", "expires_in": 60}, NOW)


@pytest.mark.parametrize("body", [{}, {"access_token": ""}, {"access_token": 5}, {"access_token": None}])
def test_missing_access_token_refused(body: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="access_token"):
        Tokens.from_response({"token_type": "Bearer", **body}, NOW)


@pytest.mark.parametrize(
    ("expires_in", "expires_at"),
    [
        (3600, NOW + 3600),
        (1.5, NOW + 1.5),
        ("3600", NOW + 3600),
        ("0", None),
        (0, None),
        (-5, None),
        ("-5", None),
        ("3600.5", None),
        ("soon", None),
        ("", None),
        (None, None),
        ([60], None),
    ],
)
def test_expires_in(expires_in: object, expires_at: float | None) -> None:
    body = {"access_token": "at", "token_type": "Bearer", "expires_in": expires_in}
    assert Tokens.from_response(body, NOW).expires_at == expires_at


def test_expires_in_absent() -> None:
    assert Tokens.from_response({"access_token": "at", "token_type": "Bearer"}, NOW).expires_at is None


def test_expires_at_is_absolute_from_now() -> None:
    body = {"access_token": "at", "token_type": "Bearer", "expires_in": 100}
    assert Tokens.from_response(body, 10.0).expires_at == 110.0
    assert Tokens.from_response(body, 20.0).expires_at == 120.0


PREVIOUS = Tokens("old-at", expires_at=NOW - 10, refresh_token="old-rt", scope="a b")


def test_refresh_without_new_refresh_token_keeps_the_old() -> None:
    tokens = Tokens.from_response({"access_token": "new-at", "token_type": "Bearer"}, NOW, PREVIOUS)
    assert tokens.access_token == "new-at"
    assert tokens.refresh_token == "old-rt"


@pytest.mark.parametrize("refresh", ["", None, 7])
def test_refresh_with_empty_or_bad_refresh_token_keeps_the_old(refresh: object) -> None:
    body = {"access_token": "new-at", "token_type": "Bearer", "refresh_token": refresh}
    assert Tokens.from_response(body, NOW, PREVIOUS).refresh_token == "old-rt"


def test_refresh_with_new_refresh_token_rotates() -> None:
    body = {"access_token": "new-at", "token_type": "Bearer", "refresh_token": "new-rt"}
    tokens = Tokens.from_response(body, NOW, PREVIOUS)
    assert tokens.refresh_token == "new-rt"
    assert tokens.access_token == "new-at"


def test_first_answer_without_refresh_token_has_none() -> None:
    assert Tokens.from_response({"access_token": "at", "token_type": "Bearer"}, NOW).refresh_token is None


def test_scope_kept_from_previous_unless_stated() -> None:
    body: dict[str, Any] = {"access_token": "new-at", "token_type": "Bearer"}
    assert Tokens.from_response(body, NOW, PREVIOUS).scope == "a b"
    assert Tokens.from_response({**body, "scope": "a"}, NOW, PREVIOUS).scope == "a"
    assert Tokens.from_response({**body, "scope": 3}, NOW, PREVIOUS).scope == "a b"
    assert Tokens.from_response(body, NOW).scope is None


def test_previous_expiry_is_not_inherited() -> None:
    previous = Tokens("old", expires_at=NOW + 999, refresh_token="rt")
    tokens = Tokens.from_response({"access_token": "new", "token_type": "Bearer"}, NOW, previous)
    assert tokens.expires_at is None


# --- Tokens.expired ----------------------------------------------------------------------


def test_never_expires_without_expires_at() -> None:
    assert not Tokens("at").expired(NOW)
    assert not Tokens("at").expired(float("1e18"))


def test_expired_with_default_leeway() -> None:
    tokens = Tokens("at", expires_at=NOW + 100)
    assert not tokens.expired(NOW)
    assert not tokens.expired(NOW + 100 - EXPIRY_LEEWAY_S - 0.001)
    assert tokens.expired(NOW + 100 - EXPIRY_LEEWAY_S)
    assert tokens.expired(NOW + 100)
    assert tokens.expired(NOW + 1000)


def test_expired_with_explicit_leeway() -> None:
    tokens = Tokens("at", expires_at=NOW + 100)
    assert not tokens.expired(NOW + 99.9, leeway=0)
    assert tokens.expired(NOW + 100, leeway=0)
    assert tokens.expired(NOW + 50, leeway=50)
    assert not tokens.expired(NOW + 49, leeway=50)


def test_the_leeway_is_30_s_or_a_quarter_of_a_short_lifetime() -> None:
    long = Tokens.from_response({"access_token": "at", "token_type": "Bearer", "expires_in": 3600}, NOW)
    short = Tokens.from_response({"access_token": "at", "token_type": "Bearer", "expires_in": 10}, NOW)
    assert not long.expired(NOW) and not long.expired(NOW + 3569)
    assert long.expired(NOW + 3570)  # 30 s before the end: renew first
    # a 10 s token is not renewed on every request, only in its last 2.5 s
    assert not short.expired(NOW) and not short.expired(NOW + 7.4)
    assert short.expired(NOW + 7.5)
    stored = Tokens("at", expires_at=NOW + 10)  # a record from before lifetimes were kept
    assert stored.expired(NOW)


# --- AuthRecord JSON ---------------------------------------------------------------------

FULL = AuthRecord(
    issuer="https://auth.example",
    token_endpoint="https://auth.example/token",
    authorization_endpoint="https://auth.example/authorize",
    registration_endpoint="https://auth.example/register",
    resource="https://mcp.example/mcp",
    auth_methods_supported=("client_secret_basic", "none"),
    client=Client(
        client_id="cid",
        client_secret="csecret",
        auth_method="client_secret_basic",
        redirect_uris=("http://127.0.0.1:33418/callback",),
        registered=True,
    ),
    tokens=Tokens("at-1", expires_at=NOW + 3600, refresh_token="rt-1", scope="a offline_access"),
)


def test_to_json_is_plain_json_with_version() -> None:
    data = FULL.to_json()
    assert data["version"] == RECORD_VERSION
    assert data["auth_methods_supported"] == ["client_secret_basic", "none"]
    assert data["client"]["redirect_uris"] == ["http://127.0.0.1:33418/callback"]
    assert data["tokens"]["access_token"] == "at-1"
    assert json.loads(json.dumps(data)) == data


def test_full_record_round_trips_through_json_text() -> None:
    assert AuthRecord.from_json(json.loads(json.dumps(FULL.to_json()))) == FULL


def test_empty_record_round_trips() -> None:
    record = AuthRecord()
    assert AuthRecord.from_json(record.to_json()) == record


def test_record_without_tokens_or_client_round_trips() -> None:
    record = AuthRecord(issuer="https://a.example", token_endpoint="https://a.example/t", resource=None)
    assert AuthRecord.from_json(record.to_json()) == record
    public = AuthRecord(client=Client("public"), tokens=Tokens("at"))
    assert AuthRecord.from_json(public.to_json()) == public


@given(
    issuer=st.text(),
    resource=st.none() | st.text(min_size=1),
    methods=st.none() | st.lists(st.text()).map(tuple),
    client_id=st.text(min_size=1),
    secret=st.none() | st.text(min_size=1),
    redirects=st.lists(st.text()).map(tuple),
    registered=st.booleans(),
    access=st.text(min_size=1),
    expires_at=st.none() | st.floats(allow_nan=False, allow_infinity=False),
    refresh=st.none() | st.text(min_size=1),
    scope=st.none() | st.text(min_size=1),
)
def test_round_trip_property(
    issuer: str,
    resource: str | None,
    methods: tuple[str, ...] | None,
    client_id: str,
    secret: str | None,
    redirects: tuple[str, ...],
    registered: bool,
    access: str,
    expires_at: float | None,
    refresh: str | None,
    scope: str | None,
) -> None:
    record = AuthRecord(
        issuer=issuer,
        token_endpoint="https://a.example/token",
        resource=resource,
        auth_methods_supported=methods,
        client=Client(client_id, secret, None, redirects, registered),
        tokens=Tokens(access, expires_at=expires_at, refresh_token=refresh, scope=scope),
    )
    assert AuthRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


@pytest.mark.parametrize("version", [None, 0, 2, "1", RECORD_VERSION + 1])
def test_other_version_is_dropped(version: object) -> None:
    data = FULL.to_json()
    if version is None:
        del data["version"]
    else:
        data["version"] = version
    assert AuthRecord.from_json(data) is None


def _broken(path: tuple[str, ...], value: object) -> dict[str, Any]:
    data = json.loads(json.dumps(FULL.to_json()))
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("client", "client_id"), _DELETE),
        (("client", "client_id"), None),
        (("client", "client_id"), ""),
        (("client", "client_id"), 42),
        (("client", "redirect_uris"), 5),
        (("client", "redirect_uris"), "http://127.0.0.1/cb"),
        (("client", "redirect_uris"), [1, 2]),
        (("tokens", "access_token"), _DELETE),
        (("tokens", "access_token"), None),
        (("tokens", "access_token"), ""),
        (("tokens", "access_token"), {"x": 1}),
    ],
)
def test_malformed_record_is_dropped(path: tuple[str, ...], value: object) -> None:
    assert AuthRecord.from_json(_broken(path, value)) is None


@pytest.mark.parametrize("data", [None, [], "record", 1, [("version", 1)]])
def test_not_a_mapping_is_dropped(data: object) -> None:
    assert AuthRecord.from_json(data) is None


def test_lenient_fields_fall_back_to_defaults() -> None:
    data = FULL.to_json()
    data["tokens"]["expires_at"] = "tomorrow"
    data["tokens"]["refresh_token"] = 9
    data["client"]["client_secret"] = ""
    data["client"]["redirect_uris"] = None
    data["auth_methods_supported"] = "none"
    data["resource"] = 7
    data["client"] = {**data["client"], "unknown": True}
    record = AuthRecord.from_json(data)
    assert record is not None
    assert record.tokens is not None and record.client is not None
    assert record.tokens.expires_at is None
    assert record.tokens.refresh_token is None
    assert record.client.client_secret is None
    assert record.client.redirect_uris == ()
    assert record.auth_methods_supported is None
    assert record.resource is None
    assert record.tokens.access_token == "at-1"


def test_boolean_expires_at_is_not_a_number() -> None:
    data = FULL.to_json()
    data["tokens"]["expires_at"] = True
    record = AuthRecord.from_json(data)
    assert record is not None and record.tokens is not None
    assert record.tokens.expires_at is None


def test_non_mapping_client_or_tokens_become_none() -> None:
    data = FULL.to_json()
    data["client"] = "cid"
    data["tokens"] = ["at"]
    record = AuthRecord.from_json(data)
    assert record is not None
    assert record.client is None
    assert record.tokens is None
    assert record.issuer == "https://auth.example"


def test_stored_expiry_survives_so_a_restart_sees_a_stale_token() -> None:
    tokens = Tokens.from_response(
        {"access_token": "at", "token_type": "Bearer", "expires_in": 60, "refresh_token": "rt"}, NOW
    )
    restored = AuthRecord.from_json(json.loads(json.dumps(AuthRecord(tokens=tokens).to_json())))
    assert restored is not None and restored.tokens is not None
    assert restored.tokens.expires_at == NOW + 60
    assert restored.tokens.expired(NOW + 3600)
    assert restored.tokens.refresh_token == "rt"


# --- secrets -----------------------------------------------------------------------------


def test_secrets_of_a_full_record() -> None:
    assert FULL.secrets() == ("csecret", "at-1", "rt-1")


def test_secrets_skip_what_is_absent() -> None:
    assert AuthRecord().secrets() == ()
    assert AuthRecord(client=Client("cid")).secrets() == ()
    assert AuthRecord(client=Client("cid", "s")).secrets() == ("s",)
    assert AuthRecord(tokens=Tokens("at")).secrets() == ("at",)
    assert AuthRecord(tokens=Tokens("at", refresh_token="rt")).secrets() == ("at", "rt")


def test_secrets_never_include_public_values() -> None:
    secrets = FULL.secrets()
    for public in ("cid", "https://auth.example", "a offline_access", "http://127.0.0.1:33418/callback"):
        assert public not in secrets
