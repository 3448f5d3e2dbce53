"""A remote server's ``credentials``: whose upstream identity its calls carry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.spec import Credentials

from .expansion import Expander
from .values import Invalid, child, expect_choice


def read_credentials(
    entry: Mapping[str, Any], oauth: bool, session_scoped: bool, path: str, exp: Expander
) -> Credentials:
    """``shared`` (the default: one OAuth identity for everyone) or ``per_user`` (each
    person signs in for themselves), which needs what makes a person's sign-in: a
    remote server with an ``oauth`` block, run shared (one connection per person)."""
    credentials = _chosen(entry, path, exp)
    if credentials is Credentials.SHARED:
        if isinstance(entry.get("oauth"), Mapping) and entry["oauth"].get("token_exchange") is True:
            raise Invalid(
                child(child(path, "oauth"), "token_exchange"),
                "token exchange sends each person's own sign-in token, so it needs "
                '"credentials": "per_user"; add that, or remove token_exchange',
            )
        return credentials
    where = child(path, "credentials")
    if not oauth:
        raise Invalid(
            where,
            '"per_user" needs a remote server with an "oauth" block (each person signs in with '
            "OAuth for themselves); add \"oauth\": {} or remove 'credentials'",
        )
    if session_scoped or entry.get("bridge"):
        raise Invalid(
            where,
            '"per_user" servers run one connection per person, not per session or bridge client; '
            'remove "scope": "session" (or "bridge": true), or \'credentials\'',
        )
    return credentials


def _chosen(entry: Mapping[str, Any], path: str, exp: Expander) -> Credentials:
    if "credentials" not in entry:
        return Credentials.SHARED
    where = child(path, "credentials")
    raw = entry["credentials"]
    return Credentials(expect_choice(exp.text(raw, where), raw, where, [c.value for c in Credentials]))
