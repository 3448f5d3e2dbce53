"""Rate limits: which buckets a call takes from, all or none, what a reload keeps; and a
1,000-call burst of one tenant through its turns on virtual time (``autojump_clock``),
answered ``ok`` exactly as fast as the bucket refills and ``rate_limited`` otherwise,
with another tenant untouched."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import rpds
import trio

from actors.connection.messages import CallOutcome, CallSucceeded, CallTool
from actors.connection.states import State
from actors.protocol.messages import CallResult, Tool
from actors.router.catalog import Catalog, ServerView, make_entry
from actors.router.envelope import Envelope
from actors.spec import ServerSpec
from supervisor.calls.rate_limits import RateLimits
from supervisor.runtime.metrics import Metrics
from supervisor.sessions.session import Session, open_session
from supervisor.settings.model import RateLimit
from tests.support.surface_fakes import FakeActor, RecordingAudit, services

PER_TENANT = RateLimit(50.0, 20, tenant="*")


async def test_each_named_field_keys_its_own_buckets(autojump_clock: trio.testing.MockClock) -> None:
    limits = RateLimits((RateLimit(1.0, 1, tenant="*"), RateLimit(1.0, 2, server="github")))
    assert limits.refusal("alice", "fs", "read") is None
    assert limits.refusal("bob", "fs", "read") is None  # a bucket per tenant
    refused = limits.refusal("alice", "fs", "read")
    assert refused is not None and refused.code == "rate_limited" and refused.retry_after_ms == 1000
    assert refused.message == (
        "rate limit reached for tenant alice: 1 calls a second, bursts of 1; retry in 1000 ms"
    )
    await trio.sleep(1)
    assert limits.refusal("alice", "github", "x") is None  # github's shared bucket: 1 of 2
    refused = limits.refusal("carol", "github", "y")  # carol's own bucket is full, github's too
    assert refused is None
    refused = limits.refusal("dave", "github", "z")
    assert refused is not None and "server github" in refused.message


async def test_a_call_takes_from_every_bucket_or_from_none(autojump_clock: trio.testing.MockClock) -> None:
    metrics = Metrics()
    limits = RateLimits((RateLimit(10.0, 5, tenant="*"), RateLimit(0.5, 1, tool="slow_*")), metrics)
    assert limits.refusal("alice", "s", "slow_one") is None
    for _ in range(3):  # the tool's bucket is empty: the tenant's keeps its tokens
        refused = limits.refusal("alice", "s", "slow_one")
        assert refused is not None and refused.retry_after_ms == 2000
        assert "tool slow_one" in refused.message
    for _ in range(4):
        assert limits.refusal("alice", "s", "fast") is None
    assert limits.refusal("alice", "s", "fast") is not None
    assert 'mcp_supervisor_rate_limited_total{tenant="alice",server="s"} 4' in metrics.render({}, 0, 0)


async def test_a_reload_keeps_a_kept_buckets_tokens_and_applies_a_new_rate_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limits = RateLimits((RateLimit(1.0, 3, tenant="*"), RateLimit(1.0, 1, server="gone")))
    for _ in range(3):
        assert limits.refusal("alice", "s", "t") is None
    assert limits.refusal("alice", "gone", "t") is not None  # alice's bucket is empty
    limits.retune((RateLimit(100.0, 3, tenant="*"),))
    refused = limits.refusal("alice", "s", "t")
    assert refused is not None and refused.retry_after_ms == 10  # still empty, refilling at 100/s
    await trio.sleep(0.01)
    assert limits.refusal("alice", "s", "t") is None
    await trio.sleep(5)  # the server=gone limit went with the reload
    for _ in range(3):
        assert limits.refusal("bob", "gone", "t") is None


# ------------------------------------------------------------------ the burst


def answer_ok(message: CallTool) -> CallOutcome:
    return CallSucceeded(CallResult(({"type": "text", "text": "ok"},)))


def one_tool_catalog(actor: FakeActor) -> Catalog:
    spec = ServerSpec("mini", command=("x",))
    entry = make_entry("mini_echo", spec, Tool("echo", "Echo the text back."), 200)
    view = ServerView("mini", spec, actor.send, state=State.STEADY, generation=1, entries=(entry,))
    return Catalog(1, {"mini": view}, rpds.HashTrieMap({entry.id: entry}))


@asynccontextmanager
async def two_tenants(limits: RateLimits) -> AsyncIterator[tuple[Session, Session, RecordingAudit]]:
    actor = FakeActor("mini", handler=answer_ok)
    session_services, audit = services(one_tool_catalog(actor))
    session_services.calls.limits = limits
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.run)
        async with (
            open_session(session_services, tenant="alice") as alice,
            open_session(session_services, tenant="bob") as bob,
        ):
            yield alice, bob, audit
        nursery.cancel_scope.cancel()


async def test_a_burst_of_one_tenant_passes_at_the_limits_rate_and_no_faster(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """1,000 calls from 10 clients of alice (each 100, 10 ms apart: 1,000 a second for
    a second) against 50 a second with bursts of 20: ``20 + floor(50 * elapsed)`` (give or take one) pass."""
    metrics = Metrics()
    async with two_tenants(RateLimits((PER_TENANT,), metrics)) as (alice, bob, audit):
        answers: list[tuple[float, Envelope]] = []
        bobs: list[Envelope] = []

        async def client() -> None:
            turn = await alice.begin_turn()
            for _ in range(100):
                answers.append((trio.current_time(), await turn.call("mini_echo", {"text": "x"})))
                await trio.sleep(0.01)

        async def other_tenant() -> None:  # bob, in the same second, well under his own limit
            turn = await bob.begin_turn()
            for _ in range(19):
                bobs.append(await turn.call("mini_echo", {"text": "y"}))
                await trio.sleep(0.05)

        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(client)
            nursery.start_soon(other_tenant)

        assert len(answers) == 1000
        elapsed = answers[-1][0] - answers[0][0]
        ok = [e for _, e in answers if e.ok]
        limited = [e for _, e in answers if not e.ok]
        assert abs(len(ok) - (20 + math.floor(50 * elapsed))) <= 1, (len(ok), elapsed)
        assert elapsed > 0.9 and len(ok) < 100  # the burst lasted the second, the limit held
        assert all(e.error is not None and e.error.code == "rate_limited" for e in limited)
        assert all(e.error is not None and 0 < (e.error.retry_after_ms or 0) <= 20 for e in limited)
        assert len(bobs) == 19 and all(e.ok for e in bobs)

        # each refusal left its row and was counted; a retry after retry_after_ms succeeds
        outcomes = [row.outcome for row in audit.rows if row.tenant == "alice"]
        assert outcomes.count("rate_limited") == len(limited) and outcomes.count("ok") == len(ok)
        assert f'tenant="alice",server="mini"}} {len(limited)}' in metrics.render({}, 0, 0)
        turn = await alice.begin_turn()
        while (refused := await turn.call("mini_echo", {})).ok:
            pass  # empty the bucket again
        assert refused.error is not None and refused.error.retry_after_ms is not None
        await trio.sleep(refused.error.retry_after_ms / 1000)
        assert (await turn.call("mini_echo", {})).ok
