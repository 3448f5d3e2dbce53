"""Session ids name their replica and are authenticated with the shared keys; a key
rotation keeps the ids minted before it."""

from __future__ import annotations

import re

from supervisor.cluster.keys import SharedKeys
from supervisor.cluster.session_ids import SessionIds

OLD, NEW = b"o" * 32, b"n" * 32


def test_a_replica_mints_ids_any_replica_reads() -> None:
    r1, r2 = SessionIds(SharedKeys([OLD]), "r1"), SessionIds(SharedKeys([OLD]), "r2")
    minted = r1.mint()
    assert re.fullmatch(r"r1\.[0-9a-f]{24}\.[A-Za-z0-9_-]{16}", minted)
    assert r2.replica_of(minted) == "r1" and r1.replica_of(minted) == "r1"
    assert r1.mint() != minted


def test_a_made_up_or_foreign_id_names_no_replica() -> None:
    r1 = SessionIds(SharedKeys([OLD]), "r1")
    minted = r1.mint()
    prefix, rand, mac = minted.split(".")
    for forged in (
        f"r2.{rand}.{mac}",
        f"{prefix}.{rand[::-1]}.{mac}",
        f"{prefix}.{rand}",
        "abc",
        "r1..x",
        f"{minted}.x",
    ):
        assert r1.replica_of(forged) is None, forged
    other_cluster = SessionIds(SharedKeys([b"x" * 32]), "r1")
    assert other_cluster.replica_of(minted) is None


def test_a_rotation_accepts_both_keys_and_signs_with_the_new() -> None:
    before = SessionIds(SharedKeys([OLD]), "r1").mint()
    rotating = SessionIds(SharedKeys([NEW, OLD]), "r2")
    after = rotating.mint()
    assert rotating.replica_of(before) == "r1" and rotating.replica_of(after) == "r2"
    assert SessionIds(SharedKeys([OLD]), "r3").replica_of(after) is None  # not yet rotated: refused
    assert SessionIds(SharedKeys([NEW]), "r3").replica_of(after) == "r2"  # old key dropped


def test_a_single_process_mints_plain_ids() -> None:
    ids = SessionIds(SharedKeys(), None)
    assert re.fullmatch(r"[0-9a-f]{16}", ids.mint())


def test_a_forwarded_mark_is_the_senders_and_bound_to_the_session() -> None:
    r1, r2 = SessionIds(SharedKeys([OLD]), "r1"), SessionIds(SharedKeys([OLD]), "r2")
    mark = r1.forwarded_mark("s1")
    assert r2.forwarded_by(mark, "s1") == "r1"
    assert r2.forwarded_by(mark, "s2") is None  # another session's mark
    assert r2.forwarded_by("r1.AAAAAAAAAAAAAAAA", "s1") is None  # made up by a client
    assert r2.forwarded_by(None, "s1") is None
