"""Tool ids (a contract): ``<server>_<tool>``, sanitized, at most 64 characters, unique."""

from __future__ import annotations

import random
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.router.naming import MAX_ID_LENGTH, assign_ids, base_id, sanitize_server, sanitize_tool

ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
HASHED_RE = re.compile(r"_[0-9a-f]{6}$")
# The hash keeps this many characters of the readable id in front of "_<6 hex>".
KEPT = MAX_ID_LENGTH - 7

Pair = tuple[str, str]


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail (instead of hanging the suite) when pure code loops forever."""

    def expired(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def one(server: str, tool: str) -> str:
    return assign_ids([(server, tool)])[(server, tool)]


# ---------------------------------------------------------------- plain ids


def test_id_is_server_underscore_tool_even_without_collision() -> None:
    assert one("time", "get_current_time") == "time_get_current_time"
    ids = assign_ids([("time", "now"), ("github", "create_issue")])
    assert ids == {("time", "now"): "time_now", ("github", "create_issue"): "github_create_issue"}


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("my-server", "get-time", "my_server_get-time"),  # '-' survives in the tool part only
        ("srv.v2", "a.b/c d", "srv_v2_a_b_c_d"),
        ("café", "naïve", "caf__na_ve"),
        ("😀", "工具", "____"),  # one '_' per character, even outside the BMP
        ("", "", "___"),  # empty parts become '_'
        ("A_Z_09", "Tool-X_9", "A_Z_09_Tool-X_9"),
    ],
)
def test_sanitizing(server: str, tool: str, expected: str) -> None:
    assert one(server, tool) == expected
    assert ID_RE.match(expected)


def test_sanitize_parts() -> None:
    assert sanitize_server("a-b.c_D9") == "a_b_c_D9"
    assert sanitize_tool("a-b.c_D9") == "a-b_c_D9"
    assert sanitize_server("") == sanitize_tool("") == "_"


# ---------------------------------------------------------------- length


def test_exactly_64_characters_is_not_cut() -> None:
    tool = "t" * (MAX_ID_LENGTH - len("srv_"))
    assert one("srv", tool) == f"srv_{tool}"
    assert len(one("srv", tool)) == MAX_ID_LENGTH


def test_longer_ids_are_cut_and_end_in_a_stable_hash() -> None:
    tool = "t" * (MAX_ID_LENGTH - len("srv_") + 1)
    raw = f"srv_{tool}"
    tool_id = one("srv", tool)
    assert len(tool_id) == MAX_ID_LENGTH
    assert tool_id.startswith(raw[:KEPT])
    assert HASHED_RE.search(tool_id)
    assert one("srv", tool) == tool_id == base_id("srv", tool)  # stable across calls


def test_long_ids_sharing_a_prefix_differ() -> None:
    prefix = "x" * 80
    a, b = one("srv", prefix + "a"), one("srv", prefix + "b")
    assert a != b
    assert a[:KEPT] == b[:KEPT]
    assert len(a) == len(b) == MAX_ID_LENGTH


def test_long_server_name_still_fits() -> None:
    tool_id = one("s" * 200, "tool")
    assert len(tool_id) == MAX_ID_LENGTH
    assert ID_RE.match(tool_id)
    assert tool_id.startswith("s" * KEPT)


# ---------------------------------------------------------------- collisions


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("a-b", "c"), ("a_b", "c")),  # server part sanitizes to the same text
        (("a_b", "c"), ("a", "b_c")),  # the '_' between the parts is ambiguous
        (("s", "x.y"), ("s", "x/y")),  # tool part sanitizes to the same text
    ],
)
def test_collisions_get_distinct_hashed_ids(first: Pair, second: Pair) -> None:
    assert base_id(*first) == base_id(*second)
    bystander = ("time", "now")
    ids = assign_ids([first, second, bystander])
    assert ids[first] != ids[second]
    for pair in (first, second):
        assert ids[pair].startswith(base_id(*pair) + "_")
        assert HASHED_RE.search(ids[pair])
        assert ID_RE.match(ids[pair])
    assert ids[bystander] == "time_now"  # a collision elsewhere renames nobody else


def test_collision_ids_do_not_depend_on_which_server_came_first() -> None:
    forward = assign_ids([("a-b", "c"), ("a_b", "c")])
    backward = assign_ids([("a_b", "c"), ("a-b", "c")])
    assert forward == backward


def test_hashed_id_that_equals_another_plain_id_is_settled() -> None:
    hashed = assign_ids([("a-b", "c"), ("a_b", "c")])[("a-b", "c")]
    squatter = ("a", hashed.removeprefix("a_"))  # plain id == the hashed id above
    assert base_id(*squatter) == hashed
    ids = assign_ids([("a-b", "c"), ("a_b", "c"), squatter])
    assert len(set(ids.values())) == 3
    assert all(ID_RE.match(v) for v in ids.values())


def test_full_length_ids_whose_hashes_collide_still_terminate() -> None:
    # These two tools sanitize to the same 63-character base, and their 6-hex digests
    # collide (found by search): both hashed ids are the same full-length string, which
    # re-hashing without a salt mapped onto itself forever.
    prefix = "t" * 60
    first, second = ("s", prefix + "\u01e6"), ("s", prefix + "\u1295")
    with deadline(2.0):
        ids = assign_ids([first, second])
    assert ids[first] != ids[second]
    assert all(len(v) == MAX_ID_LENGTH and ID_RE.match(v) for v in ids.values())


def test_duplicate_pairs_are_one_tool() -> None:
    ids = assign_ids([("time", "now"), ("time", "now")])
    assert ids == {("time", "now"): "time_now"}


# ---------------------------------------------------------------- properties

# Small alphabets make sanitizing collisions common; arbitrary text covers the rest.
names = st.one_of(
    st.text(alphabet="ab_-.é", max_size=4),
    st.text(max_size=90),
)
pairs_lists = st.lists(st.tuples(names, names), max_size=25)


@given(names, names)
def test_single_id_shape(server: str, tool: str) -> None:
    tool_id = one(server, tool)
    assert ID_RE.match(tool_id)
    assert tool_id == base_id(server, tool)
    raw = f"{sanitize_server(server)}_{sanitize_tool(tool)}"
    if len(raw) <= MAX_ID_LENGTH:
        assert tool_id == raw
    else:
        assert tool_id.startswith(raw[:KEPT])
        assert HASHED_RE.search(tool_id)


@given(pairs_lists)
def test_ids_are_valid_unique_and_keep_the_server_prefix(pairs: list[Pair]) -> None:
    ids = assign_ids(pairs)
    assert set(ids) == set(pairs)
    assert len(set(ids.values())) == len(ids)
    bases = [base_id(*pair) for pair in set(pairs)]
    for (server, tool), tool_id in ids.items():
        assert ID_RE.match(tool_id), tool_id
        prefix = sanitize_server(server) + "_"
        if len(prefix) <= KEPT:
            assert tool_id.startswith(prefix)
        if bases.count(base_id(server, tool)) == 1:
            assert tool_id == base_id(server, tool)  # no collision: no suffix


@given(pairs_lists, st.randoms(use_true_random=False))
def test_ids_do_not_depend_on_order_and_are_deterministic(pairs: list[Pair], rnd: random.Random) -> None:
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    assert assign_ids(shuffled) == assign_ids(pairs) == assign_ids(list(pairs))
