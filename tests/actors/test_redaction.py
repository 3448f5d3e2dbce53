"""Redactor: known secrets and credential-shaped text never survive."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.redaction import Redactor


def test_known_secret_is_masked_everywhere() -> None:
    r = Redactor(["sk-live-0123456789"])
    assert r.redact("a sk-live-0123456789 b sk-live-0123456789") == "a *** b ***"


def test_short_and_empty_secrets_are_ignored() -> None:
    r = Redactor(["", "abc"])
    assert r.redact("abc is a word, so is abcdef") == "abc is a word, so is abcdef"


def test_longest_secret_wins_when_one_contains_another() -> None:
    r = Redactor(["abcd", "abcdefgh"])
    assert r.redact("x abcdefgh y") == "x *** y"
    assert r.longest_secret == 8


def test_secret_with_regex_metacharacters_is_literal() -> None:
    r = Redactor(["a.b*c+d(e)"])
    assert r.redact("see a.b*c+d(e) and aXbbbcd") == "see *** and aXbbbcd"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.def-ghi", "Authorization: ***"),
        ('curl -H "Authorization: Basic dXNlcjpwYXNz" http://x', 'curl -H "Authorization: ***" http://x'),
        ("{'Authorization': 'Bearer q1', 'X': 'y'}", "{'Authorization': '***', 'X': 'y'}"),
        ("proxy-authorization=secretvalue", "proxy-authorization=***"),
        ("sent bearer eyJhbGciOi.J9x-y_z= upstream", "sent bearer *** upstream"),
        ("GITHUB_TOKEN=ghp_abcdef more", "GITHUB_TOKEN=*** more"),
        ("https://h/cb?access_token=zz9&state=1", "https://h/cb?access_token=***&state=1"),
        ('{"api_key": "two words", "n": 1}', '{"api_key": "***", "n": 1}'),
        ("x-api-key: k123", "x-api-key: ***"),
        ("apiKey=k123", "apiKey=***"),
        ("clientSecret:abc123", "clientSecret:***"),
        ("db password = hunter2", "db password = ***"),
        ("PASSWD=hunter2", "PASSWD=***"),
    ],
)
def test_generic_patterns(text: str, expected: str) -> None:
    assert Redactor().redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "server started on port 8080",
        "a key to success",
        "the tokenizer is ready",  # no separator and value: not a credential
        "bearer",
        "Authorization",
        "",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert Redactor(["sk-secret-value"]).redact(text) == text


def test_generic_value_does_not_stop_inside_a_secret() -> None:
    # '!' ends a bearer token by the generic rule; the known secret is masked whole.
    r = Redactor(["abc!def"])
    assert r.redact("Bearer xyzabc!def tail") == "Bearer *** tail"


def test_secret_inside_the_kept_key_is_masked() -> None:
    r = Redactor(["s3cr3tkey"])
    assert "s3cr3tkey" not in r.redact("my_s3cr3tkey_token=5")


def test_generic_value_stops_at_line_end() -> None:
    assert Redactor().redact("token:\nnext line") == "token:\nnext line"
    assert Redactor().redact("token=a\nnext") == "token=***\nnext"


def test_repr_hides_secrets() -> None:
    assert "hunter22" not in repr(Redactor(["hunter22"]))


def test_long_lines_stay_fast() -> None:
    import time

    r = Redactor(["sk-live-0123456789"])
    line = "w" * 4096 + " token=abc " + "k" * 4096
    start = time.perf_counter()
    for _ in range(20):
        out = r.redact(line)
    assert "abc" not in out
    # Quadratic behaviour would take seconds here.
    assert time.perf_counter() - start < 0.5


_SECRET = st.text(
    alphabet=st.characters(exclude_characters="*", exclude_categories=["Cs"]),
    min_size=4,
    max_size=30,
)


# Surroundings rich in the generic patterns' own characters, so they get exercised.
_AROUND = st.text(alphabet=st.sampled_from(list("token=: \"'Bearer Authorization_-key\n")) | st.characters())


@given(secrets=st.lists(_SECRET, min_size=1, max_size=4), before=_AROUND, after=_AROUND)
def test_no_known_secret_survives(secrets: list[str], before: str, after: str) -> None:
    r = Redactor(secrets)
    for secret in secrets:
        assert secret not in r.redact(before + secret + after)


@given(text=_AROUND)
def test_redaction_is_idempotent(text: str) -> None:
    r = Redactor(["sk-live-0123456789"])
    once = r.redact(text)
    assert r.redact(once) == once


def test_a_servers_error_data_is_redacted_as_json() -> None:
    r = Redactor(["sk-live-0123456789"])
    data = {"requiredCapabilities": {"sampling": {}}, "hint": "key sk-live-0123456789", "client_secret": "x"}
    assert r.redact_json(data) == {
        "requiredCapabilities": {"sampling": {}},
        "hint": "key ***",
        "client_secret": "***",
    }
    assert r.redact_json(None) is None and r.redact_json({1, 2}) is None  # not JSON: dropped
