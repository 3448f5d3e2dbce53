"""Every call attempt gets one envelope and one audit row, however odd its input.

Arguments nested deeper than ``MAX_ARGUMENT_DEPTH`` are refused before anything else
runs; their row hashes the request bytes (the HTTP body) or, for an embedding's call,
the bounded JSON of the arguments. Refusals (unknown tool, invalid arguments, denied)
and ``tool_search`` calls leave rows too. The Hypothesis tests throw arbitrary JSON at
``turn.call`` and at ``POST …/calls`` through the app in-process.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import orjson
import trio
import trio.testing
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from actors.router.depth import MAX_ARGUMENT_DEPTH, nested_deeper_than
from actors.router.envelope import ERROR_CODES
from supervisor.admin.bodies import prune_nesting
from supervisor.store.records import bounded_hash, bounded_json, canonical_json
from tests.support.admin import loop_in_thread
from tests.support.inprocess import HOST, Running, running

T = TypeVar("T")


def nest(depth: int, leaf: Any = 1, *, key: str | None = "a") -> Any:
    """``depth`` levels of objects (``key``) or, with key None, arrays around ``leaf``."""
    value = leaf
    for _ in range(depth):
        value = [value] if key is None else {key: value}
    return value


def nested_json(depth: int, *, key: str | None = "a") -> bytes:
    """The JSON text of ``nest(depth)``, built without recursion."""
    if key is None:
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def is_envelope(answer: Any, tool: str) -> bool:
    if not isinstance(answer, dict) or answer.get("tool") != tool:
        return False
    if answer.get("ok") is True:
        return True
    return answer.get("ok") is False and answer["error"]["code"] in ERROR_CODES


# ------------------------------------------------------------------ the embedding

JSON_LEAVES_FOR_BOUND = st.none() | st.booleans() | st.integers() | st.floats() | st.text()


def test_the_depth_check_counts_containers_and_stops_early() -> None:
    assert not nested_deeper_than({"a": 1}, 1) and nested_deeper_than({"a": [1]}, 1)
    assert not nested_deeper_than(nest(MAX_ARGUMENT_DEPTH)) and nested_deeper_than(
        nest(MAX_ARGUMENT_DEPTH + 1)
    )
    assert not nested_deeper_than("scalar", 0)
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    assert nested_deeper_than(cyclic)
    assert nested_deeper_than(nest(200_000, key=None))


def test_pruning_skips_strings_and_leaves_shallow_or_broken_bodies_alone() -> None:
    body = b'{"t": "[[[{", "a": [[[["]]\\"]", [[9]]]]]], "b": 2}'
    assert prune_nesting(body, 3) == b'{"t": "[[[{", "a": [[null]], "b": 2}'
    assert orjson.loads(prune_nesting(body, 3)) == {"t": "[[[{", "a": [[None]], "b": 2}
    for unchanged in (body, b"[[[", b"]]]", b'["unterminated'):
        assert prune_nesting(unchanged, 7) is unchanged


@given(
    value=st.recursive(
        JSON_LEAVES_FOR_BOUND, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)
    )
)
def test_bounded_json_is_the_canonical_json(value: Any) -> None:
    assert bounded_json(value) == canonical_json(value).encode()


async def test_too_deep_arguments_are_refused_before_anything_else_runs(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with running(tmp_path) as run:
        deep = [
            nest(depth, key=key) for depth in (MAX_ARGUMENT_DEPTH + 1, 1_000, 100_000) for key in ("a", None)
        ]
        for arguments in deep:
            envelope = await run.turn.call("fake_echo", arguments)
            assert envelope.error is not None and envelope.error.code == "invalid_arguments"
            assert envelope.error.message == (
                f"invalid arguments for fake_echo: $: nested deeper than {MAX_ARGUMENT_DEPTH} levels"
            )
        unknown = await run.turn.call("nope", nest(5_000))
        assert unknown.error is not None and unknown.error.code == "invalid_arguments"
        assert run.server.calls() == []  # the server never saw one of them
        rows = (await run.rows())[::-1]
        assert [(r.tool, r.server, r.decision, r.outcome) for r in rows] == [
            *[("fake_echo", "fake", "none", "invalid_arguments")] * len(deep),
            ("nope", "", "none", "invalid_arguments"),
        ]
        assert [(r.args_sha256, r.args_bytes) for r in rows[:-1]] == [bounded_hash(a) for a in deep]
        # The limit itself is fine, and reaches the server intact.
        deepest = nest(MAX_ARGUMENT_DEPTH, key="k")
        envelope = await run.turn.call("fake_echo", deepest)
        assert envelope.ok and orjson.loads(envelope.text) == deepest


async def test_every_refusal_and_every_search_call_leaves_one_row(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with running(tmp_path) as run:
        attempts: list[tuple[str, Any, str, str]] = [
            ("nope", {}, "", "unknown_tool"),
            ("fake_echo", ["not", "an", "object"], "fake", "invalid_arguments"),
            ("fake_note", {"text": 5}, "fake", "invalid_arguments"),
            ("fake_wipe", {}, "fake", "denied"),
            ("tool_search", {"query": "echo"}, "", "ok"),
            ("tool_search", {}, "", "invalid_arguments"),
            ("fake_echo", {"text": "hi"}, "fake", "ok"),
        ]
        for tool, arguments, _server, outcome in attempts:
            envelope = await run.turn.call(tool, arguments)
            assert (envelope.error.code if envelope.error else "ok") == outcome, (tool, envelope)
        rows = (await run.rows())[::-1]
        assert [(r.tool, r.server, r.outcome) for r in rows] == [(t, s, o) for t, _, s, o in attempts]
        assert rows[3].decision == "deny" and rows[-1].decision == "allow"
        # An unknown name is kept bounded and valid UTF-8 (a lone surrogate cannot be stored).
        await run.turn.call("\ud800" + "x" * 5_000, {})
        last = (await run.rows())[0]
        assert last.outcome == "unknown_tool" and len(last.tool) == 200 and last.tool.startswith("?x")


# ------------------------------------------------------------------ over HTTP


async def test_too_deep_arguments_over_http_get_an_envelope_and_their_row_hashes_the_body(
    thread_safe_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async with running(tmp_path) as run:
        bodies = [
            b'{"tool": "fake_echo", "arguments": ' + nested_json(depth, key=key) + b"}"
            for depth in (MAX_ARGUMENT_DEPTH + 1, 1_000, 100_000)  # the last is deeper than orjson reads
            for key in ("a", None)
        ]
        for body in bodies:
            status, answer = await run.post_call(body)
            assert status == 200 and answer["error"]["code"] == "invalid_arguments", answer
            assert "nested deeper than 64 levels" in answer["error"]["message"]
        assert run.server.calls() == []
        rows = (await run.rows())[::-1]
        assert [(r.args_sha256, r.args_bytes) for r in rows] == [
            (hashlib.sha256(body).hexdigest(), len(body)) for body in bodies
        ]
        # Other bodies nested past the parser's reach are a clean 400.
        client = run.app.test_client()
        reply = await client.post(
            "/v1/sessions", data=b'{"pinned": ' + nested_json(50_000) + b"}", headers=HOST
        )
        assert reply.status_code == 400
        message = (await reply.get_json())["error"]["message"]
        assert message.startswith("the body is nested deeper than 1024 levels"), message
        # Arguments that are no object are the call's own refusal, not a 400.
        status, answer = await run.post_call(b'{"tool": "fake_echo", "arguments": [1]}')
        assert status == 200 and answer["error"]["code"] == "invalid_arguments"


# ------------------------------------------------------------------ arbitrary input

JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(codec="utf-8"), max_size=30),  # NUL and every plane included
)
# A long string, below the admin API's 1 MiB body limit even when every character is escaped.
LONG_TEXT = st.builds(
    str.__mul__, st.text(st.characters(codec="utf-8"), min_size=1, max_size=4), st.integers(1, 40_000)
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
ARGUMENTS = st.one_of(
    JSON_VALUES,
    st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5),
    st.builds(nest, st.integers(1, 3_000), JSON_LEAVES, key=st.sampled_from(["a", "\x00", None])),
    st.builds(lambda n: {f"k{i}": "v" * 100 for i in range(n)}, st.integers(100, 2_000)),  # size
    st.fixed_dictionaries({"text": LONG_TEXT}),
)
TOOL_NAMES = st.one_of(
    st.sampled_from(["fake_echo", "fake_note", "fake_wipe", "tool_search"]),
    st.text(st.characters(codec="utf-8"), max_size=40),
)


@contextmanager
def in_a_thread(tmp_path: Path) -> Iterator[Callable[[Callable[[Running], Awaitable[T]]], T]]:
    """``running`` in a Trio loop of its own thread (Hypothesis drives a synchronous
    test); yields a function that runs ``job(running)`` in that loop."""
    with loop_in_thread(lambda: running(tmp_path), 30, "deep-arguments") as (run, token):

        def job(work: Callable[[Running], Awaitable[T]]) -> T:
            async def task() -> T:
                with trio.fail_after(30):
                    return await work(run)

            return trio.from_thread.run(task, trio_token=token)

        yield job


def test_arbitrary_json_gets_one_envelope_and_one_row_each(tmp_path: Path) -> None:
    with in_a_thread(tmp_path) as job:

        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
        @given(tool=TOOL_NAMES, arguments=ARGUMENTS)
        @example(tool="fake_echo", arguments=nest(201, 18_446_744_073_709_551_616))  # past 64 bits, deep
        def check(tool: str, arguments: Any) -> None:
            async def both(run: Running) -> tuple[Any, int, Any, int]:
                before = len(await run.rows())
                envelope = await run.turn.call(tool, arguments)
                body = b'{"tool": ' + orjson.dumps(tool) + b', "arguments": ' + _dumps(arguments) + b"}"
                status, answer = await run.post_call(body)
                return envelope.as_dict(), status, answer, len(await run.rows()) - before

            direct, status, answer, rows = job(both)
            assert is_envelope(direct, tool), direct
            assert status == 200 and is_envelope(answer, tool), (status, answer)
            assert rows == 2, "exactly one audit row per call attempt"

        check()


def _dumps(value: Any) -> bytes:
    """JSON of any depth (orjson writes 254 levels at most, and 64-bit integers: the
    innermost value, a number past 64 bits too, is the stdlib's)."""
    if not nested_deeper_than(value, 200):
        return json.dumps(value, ensure_ascii=False).encode()
    inner: list[bytes] = []
    closers: list[bytes] = []
    while isinstance(value, dict | list) and len(value) == 1:
        if isinstance(value, dict):
            ((key, value),) = value.items()
            inner.append(b"{" + orjson.dumps(key) + b":")
            closers.append(b"}")
        else:
            inner.append(b"[")
            (value,) = value
            closers.append(b"]")
    leaf = json.dumps(value, ensure_ascii=False).encode()
    return b"".join(inner) + leaf + b"".join(reversed(closers))
