"""The request state the gateway mints for input-required rounds
(``supervisor/gateway/request_state.py``): authentic, bound and expiring."""

from __future__ import annotations

import pytest

from supervisor.gateway.request_state import RequestStateKey, StateClaims, StateRefused

CLAIMS = StateClaims("tenant-a", "call-1", 2, "tools/call", "mini_echo", 100.0)


def test_a_minted_state_round_trips_its_claims() -> None:
    key = RequestStateKey()
    assert key.check(key.mint(CLAIMS), tenant="tenant-a", now=99.0) == CLAIMS


@pytest.mark.parametrize(
    "mangle",
    [
        lambda s: s + "-TAMPERED",
        lambda s: s[:-2] + ("AA" if not s.endswith("AA") else "BB"),
        lambda s: "x" + s,
        lambda s: s.replace(".", ""),
        lambda s: "not base64!.at all",
    ],
)
def test_a_tampered_state_is_refused(mangle: object) -> None:
    key = RequestStateKey()
    with pytest.raises(StateRefused, match="requestState"):
        key.check(mangle(key.mint(CLAIMS)), tenant="tenant-a", now=0.0)  # type: ignore[operator]


def test_a_changed_claim_fails_the_integrity_check() -> None:
    key = RequestStateKey()
    mac = key.mint(CLAIMS).split(".")[1]
    forged = RequestStateKey().mint(StateClaims("tenant-a", "call-1", 2, "tools/call", "other", 1e9))
    with pytest.raises(StateRefused, match="integrity"):
        key.check(f"{forged.split('.')[0]}.{mac}", tenant="tenant-a", now=0.0)


def test_another_instances_state_is_refused() -> None:
    with pytest.raises(StateRefused, match="another gateway instance"):
        RequestStateKey().check(RequestStateKey().mint(CLAIMS), tenant="tenant-a", now=0.0)


def test_another_tenants_state_is_refused() -> None:
    key = RequestStateKey()
    with pytest.raises(StateRefused, match="another tenant"):
        key.check(key.mint(CLAIMS), tenant="tenant-b", now=0.0)


def test_an_expired_state_is_refused() -> None:
    key = RequestStateKey()
    with pytest.raises(StateRefused, match="expired"):
        key.check(key.mint(CLAIMS), tenant="tenant-a", now=100.0)


# ------------------------------------------------------------------ replicas

SHARED_OLD, SHARED_NEW = b"o" * 32, b"n" * 32


def test_a_replica_reads_a_state_another_holds_and_does_not_resume_it() -> None:
    from supervisor.cluster.keys import SharedKeys
    from supervisor.gateway.request_state import HeldElsewhere

    r1 = RequestStateKey(SharedKeys([SHARED_OLD]), holder="r1:aa")
    r2 = RequestStateKey(SharedKeys([SHARED_OLD]), holder="r2:bb")
    state = r1.mint(CLAIMS)
    assert r1.check(state, tenant="tenant-a", now=99.0).holder == "r1:aa"
    with pytest.raises(HeldElsewhere) as elsewhere:
        r2.check(state, tenant="tenant-a", now=0.0)
    assert elsewhere.value.claims.holder == "r1:aa" and elsewhere.value.claims.call == "call-1"
    with pytest.raises(StateRefused, match="another tenant"):
        r2.read(state, tenant="tenant-b")
    # a rotation: the new key signs, the old one still opens what was minted before it
    rotated = RequestStateKey(SharedKeys([SHARED_NEW, SHARED_OLD]), holder="r1:aa")
    assert rotated.check(state, tenant="tenant-a", now=99.0).call == "call-1"
    with pytest.raises(StateRefused, match="integrity"):
        r1.check(rotated.mint(CLAIMS), tenant="tenant-a", now=99.0)  # r1 not rotated yet
