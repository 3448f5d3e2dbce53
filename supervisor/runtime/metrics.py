"""Prometheus metrics: connections by state, reconnects, calls by server and outcome,
call latency, calls refused by a rate limit, approvals pending, catalog epoch, audit
rows waiting for the disk and dropped. Rendered by hand in the text exposition format: a few counters and one
histogram do not need a client library, and the call path records into plain lists."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import attrs

from actors.connection.states import State
from actors.router.catalog import ServerView

FINE_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005)
"""Below 10 ms, where a stdio call lands (a fraction of a millisecond)."""
OTEL_MCP_BUCKETS_S = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
"""The ExplicitBucketBoundaries the OpenTelemetry MCP semantic convention gives
``mcp.client.operation.duration`` (seconds), so dashboards made for it fit."""
CALL_DURATION_BUCKETS_S: tuple[float, ...] = (*FINE_BUCKETS_S, *OTEL_MCP_BUCKETS_S)
"""Upper bounds (``le``) of the call latency histogram, in seconds."""

_LE = (*(f'le="{float(bound)!r}"' for bound in CALL_DURATION_BUCKETS_S), 'le="+Inf"')


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def labels(**values: str) -> str:
    """``{name="value",...}`` with the values escaped ("" when there are none)."""
    if not values:
        return ""
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in values.items()) + "}"


def sample_value(value: float) -> str:
    """A sample's value, exact: an integer as it is (``:g`` wrote 1234567 as
    1.23457e+06), a float as Python's shortest repr, infinities as the format spells them."""
    if isinstance(value, int):
        return str(int(value))
    if math.isfinite(value):
        return repr(value)
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


@attrs.frozen
class Family:
    """One metric family a part of the service contributes (the gateway, the bridge)."""

    name: str
    kind: str
    help: str
    samples: Sequence[tuple[str, float]]


class _Series:
    """One (server, outcome)'s histogram: a count per bucket (not cumulative, so a call
    adds one to one slot) and the sum of the durations."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(CALL_DURATION_BUCKETS_S) + 1)
        self.total = 0.0


class Metrics:
    """Counters fed on the call path (synchronously, no awaits) and rendered on demand."""

    def __init__(self) -> None:
        # server -> outcome -> its histogram; both are bounded: servers are configured,
        # outcomes are the envelope's codes. Never a tool, tenant or person.
        self._calls: dict[str, dict[str, _Series]] = {}
        # (tenant, server) -> calls refused ``rate_limited``: tenants are the config's.
        self._rate_limited: Counter[tuple[str, str]] = Counter()

    def count_rate_limited(self, tenant: str, server: str) -> None:
        """Count one call a rate limit refused (``supervisor/calls/rate_limits.py``)."""
        self._rate_limited[(tenant, server)] += 1

    def observe_call(self, server: str, outcome: str, seconds: float) -> None:
        """Count one finished call (``server`` "" when it named none). The hot end of
        the call path: two look-ups, a bisect, an increment; allocates only a series' first time."""
        by_outcome = self._calls.get(server)
        if by_outcome is None:
            by_outcome = self._calls[server] = {}
        series = by_outcome.get(outcome)
        if series is None:
            series = by_outcome[outcome] = _Series()
        series.counts[bisect.bisect_left(CALL_DURATION_BUCKETS_S, seconds)] += 1
        series.total += seconds

    def render(
        self,
        servers: Mapping[str, ServerView],
        epoch: int,
        approvals_pending: int,
        *,
        audit_rows_pending: int = 0,
        audit_rows_dropped: int = 0,
        extra: Iterable[Family] = (),
    ) -> str:
        """The text exposition format."""
        lines: list[str] = []

        def family(name: str, kind: str, help_text: str, samples: Iterable[tuple[str, float]]) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(f"{name}{labels} {sample_value(value)}" for labels, value in samples)

        by_state = Counter(view.state for view in servers.values())
        family(
            "mcp_supervisor_connections",
            "gauge",
            "Connections by state.",
            ((f'{{state="{state.value}"}}', by_state.get(state, 0)) for state in State),
        )
        family(
            "mcp_supervisor_reconnects_total",
            "counter",
            "Reconnect attempts (backoff to resolve) per server.",
            ((f'{{server="{_escape(name)}"}}', view.reconnects) for name, view in servers.items()),
        )
        series = [
            (f'server="{_escape(server)}",outcome="{_escape(outcome)}"', histogram)
            for server, by_outcome in sorted(self._calls.items())
            for outcome, histogram in sorted(by_outcome.items())
        ]
        family(
            "mcp_supervisor_calls_total",
            "counter",
            "Calls by server and outcome (ok or an envelope error code).",
            ((f"{{{pair}}}", sum(histogram.counts)) for pair, histogram in series),
        )
        name = "mcp_supervisor_call_duration_seconds"
        lines.append(f"# HELP {name} Call latency in seconds (time with the server), by server and outcome.")
        lines.append(f"# TYPE {name} histogram")
        for pair, histogram in series:
            running = 0
            for le, count in zip(_LE, histogram.counts, strict=True):
                running += count
                lines.append(f"{name}_bucket{{{pair},{le}}} {running}")
            lines.append(f"{name}_sum{{{pair}}} {sample_value(histogram.total)}")
            lines.append(f"{name}_count{{{pair}}} {running}")
        family(
            "mcp_supervisor_rate_limited_total",
            "counter",
            "Calls refused by a rate limit, by tenant and server.",
            (
                (f'{{tenant="{_escape(tenant)}",server="{_escape(server)}"}}', count)
                for (tenant, server), count in sorted(self._rate_limited.items())
            ),
        )
        family(
            "mcp_supervisor_approvals_pending",
            "gauge",
            "Approval requests waiting.",
            [("", approvals_pending)],
        )
        family("mcp_supervisor_catalog_epoch", "gauge", "The current catalog epoch.", [("", epoch)])
        family(
            "mcp_supervisor_audit_rows_pending",
            "gauge",
            "Audit journal lines waiting in memory because the disk refused them.",
            [("", audit_rows_pending)],
        )
        family(
            "mcp_supervisor_audit_rows_dropped_total",
            "counter",
            "Audit journal lines dropped because the memory queue was full.",
            [("", audit_rows_dropped)],
        )
        for more in extra:
            family(more.name, more.kind, more.help, more.samples)
        return "\n".join(lines) + "\n"
