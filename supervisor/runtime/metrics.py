"""Prometheus metrics: connections by state, reconnects, calls by outcome, call
latency, approvals pending, catalog epoch, audit rows waiting for the disk and dropped.
Rendered by hand in the text exposition format (no client library: a few counters do
not need one)."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import attrs

from actors.connection.states import State
from actors.router.catalog import ServerView

LATENCY_BUCKETS_MS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


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


class Metrics:
    """Counters fed on the call path (synchronously, no awaits) and rendered on demand."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self._latency_sum_ms = 0.0
        self._latency_count = 0

    def observe_call(self, outcome: str, duration_ms: int) -> None:
        """Count one finished call."""
        self.calls[outcome] += 1
        self._buckets[bisect.bisect_left(LATENCY_BUCKETS_MS, duration_ms)] += 1
        self._latency_sum_ms += duration_ms
        self._latency_count += 1

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
        family(
            "mcp_supervisor_calls_total",
            "counter",
            "Calls by outcome (ok or an envelope error code).",
            ((f'{{outcome="{_escape(outcome)}"}}', count) for outcome, count in sorted(self.calls.items())),
        )
        lines.append("# HELP mcp_supervisor_call_duration_ms Call latency in milliseconds.")
        lines.append("# TYPE mcp_supervisor_call_duration_ms histogram")
        running = 0
        for bound, count in zip((*LATENCY_BUCKETS_MS, "+Inf"), self._buckets, strict=True):
            running += count
            lines.append(f'mcp_supervisor_call_duration_ms_bucket{{le="{bound}"}} {running}')
        lines.append(f"mcp_supervisor_call_duration_ms_sum {sample_value(self._latency_sum_ms)}")
        lines.append(f"mcp_supervisor_call_duration_ms_count {self._latency_count}")
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
