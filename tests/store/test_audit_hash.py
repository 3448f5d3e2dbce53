"""``supervisor.store.audit_hash``: the audit digest of ``store.hash_arguments``, with
orjson doing the encoding only where it writes the very same bytes."""

from __future__ import annotations

import types
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.store import audit_hash, hash_arguments, records

json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too: orjson refuses those
    | st.floats(allow_nan=True, allow_infinity=True)  # 1e-05 and NaN differ between the encoders
    | st.text(),  # lone surrogates included
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_like, max_size=5))
def test_audit_hash_is_hash_arguments(arguments: dict[str, Any]) -> None:
    assert audit_hash(arguments) == hash_arguments(arguments)


@pytest.mark.parametrize(
    "arguments",
    [
        {"x": 1e-05},
        {"x": float("nan")},
        {"x": 2**70},
        {"x": "\ud800"},
        {"b": [1, {"z": None, "y": "é"}], "a": True},
        types.MappingProxyType({"a": 1}),
        {"deep": [[[[{"k": "v"}]]]]},
    ],
)
def test_edge_arguments_hash_alike(arguments: Any) -> None:
    assert audit_hash(arguments) == hash_arguments(arguments)


def test_plain_arguments_skip_the_standard_library(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(arguments: Any) -> tuple[str, int]:
        raise AssertionError("the orjson path should have answered")

    expected = hash_arguments({"path": "/tmp/x", "n": 3, "flags": [True, None]})
    monkeypatch.setattr(records, "hash_arguments", refuse)
    assert audit_hash({"path": "/tmp/x", "n": 3, "flags": [True, None]}) == expected
    with pytest.raises(AssertionError):
        audit_hash({"ratio": 0.5})  # floats go to hash_arguments
