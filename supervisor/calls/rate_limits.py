"""Rate limits: token buckets on calls, keyed by tenant, server and tool.

Why: ``concurrency`` bounds what is in flight at once; a tenant that fires calls as
fast as answers come back needs a bound on the rate too. A call over a limit is
answered at once with ``rate_limited`` and ``retry_after_ms`` (never queued: a caller
that waits silently cannot tell a limit from a hung server), and leaves its audit row
like any refusal.

Each ``limits`` entry covers the calls whose values match the globs it names (tenant,
server, tool: the server's own name of what is asked, as exposure lists match it) and
keeps one bucket per combination of those values: ``{"tenant": "*"}`` one per tenant,
``{"server": "github"}`` one for github shared by every tenant, none named one for
everything. A call must fit every bucket that covers it, and takes a token from each
only when it fits all of them. Time is Trio's, so tests run on ``MockClock``.

Buckets live in this process: supervisors sharing a PostgreSQL store do not share
them (a shared bucket would put a database round trip on every call), so an operator
divides a limit across replicas (docs/deployment.md).

A reload keeps the buckets of an entry whose selector it keeps (their tokens, with
the new rate and burst from then on: ``TokenBucket.retune``) and drops the others'.
"""

from __future__ import annotations

import math
from fnmatch import fnmatchcase

import trio

from actors.router.envelope import CallError
from actors.token_bucket import TokenBucket
from supervisor.runtime.metrics import Metrics
from supervisor.settings.model import RateLimit

Selector = tuple[str | None, str | None, str | None]
_Bound = tuple[RateLimit, TokenBucket]
KEPT_ROUTES = 4096
"""How many (tenant, server, tool) triples keep the buckets they were found to need."""


def _covers(limit: RateLimit, values: tuple[str, str, str]) -> bool:
    return all(
        glob is None or fnmatchcase(value, glob) for glob, value in zip(limit.selector, values, strict=True)
    )


class RateLimits:
    """The ``limits`` of the running config and their buckets (see the module docstring)."""

    def __init__(self, limits: tuple[RateLimit, ...] = (), metrics: Metrics | None = None) -> None:
        self._limits = limits
        self._metrics = metrics
        self._buckets: dict[tuple[Selector, tuple[str | None, ...]], TokenBucket] = {}
        self._routes: dict[tuple[str, str, str], tuple[_Bound, ...]] = {}

    def refusal(self, tenant: str, server: str, tool: str) -> CallError | None:
        """Take a token for one call from every bucket that covers it, or none when one
        is empty: then the ``rate_limited`` error to answer with (and it is counted)."""
        if not self._limits:
            return None
        bound = self._route(tenant, server, tool)
        if not bound:
            return None
        now = trio.current_time()
        for _limit, bucket in bound:
            if not bucket.ready(now):
                break
        else:  # every bucket has a token: take one from each
            for _limit, bucket in bound:
                bucket.take(now)
            return None
        short = [(limit, bucket) for limit, bucket in bound if not bucket.ready(now)]
        limit, bucket = max(short, key=lambda pair: pair[1].retry_after(now))
        wait_ms = max(1, math.ceil(bucket.retry_after(now) * 1000))
        if self._metrics is not None:
            self._metrics.count_rate_limited(tenant, server)
        return CallError("rate_limited", _message(limit, (tenant, server, tool), wait_ms), wait_ms)

    def _route(self, tenant: str, server: str, tool: str) -> tuple[_Bound, ...]:
        """The (limit, bucket) pairs of one call's values (found once per triple)."""
        values = (tenant, server, tool)
        bound = self._routes.get(values)
        if bound is None:
            bound = tuple(
                (limit, self._bucket(limit, values)) for limit in self._limits if _covers(limit, values)
            )
            if len(self._routes) >= KEPT_ROUTES:
                self._routes.clear()
            self._routes[values] = bound
        return bound

    def _bucket(self, limit: RateLimit, values: tuple[str, str, str]) -> TokenBucket:
        key = (
            limit.selector,
            tuple(v if g is not None else None for g, v in zip(limit.selector, values, strict=True)),
        )
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(limit.per_s, limit.burst)
        return bucket

    def retune(self, limits: tuple[RateLimit, ...]) -> None:
        """The limits of a reloaded config: buckets whose selector stays keep their
        tokens and take the new rate and burst at once; the others go."""
        now = trio.current_time()
        by_selector = {limit.selector: limit for limit in limits}
        for key, bucket in list(self._buckets.items()):
            limit = by_selector.get(key[0])
            if limit is None:
                del self._buckets[key]
            elif (limit.per_s, limit.burst) != (bucket.rate_per_s, bucket.burst):
                bucket.retune(now, limit.per_s, limit.burst)
        self._limits = limits
        self._routes.clear()


def _message(limit: RateLimit, values: tuple[str, str, str], wait_ms: int) -> str:
    """Which limit (by the values it is keyed by) and when to try again."""
    named = [
        f"{field} {value}"
        for field, glob, value in zip(("tenant", "server", "tool"), limit.selector, values, strict=True)
        if glob is not None
    ]
    which = ", ".join(named) if named else "every call"
    return (
        f"rate limit reached for {which}: {limit.per_s:g} calls a second, bursts of {limit.burst}; "
        f"retry in {wait_ms} ms"
    )
