"""The MCP conventions' four metrics as OpenTelemetry histograms, in seconds, beside
the spans (``otel.py``): ``mcp.client.operation.duration`` and
``mcp.server.operation.duration`` for every CLIENT and SERVER span, and the session
durations (a connection to a server that became ready, on our client side; a gateway
client's session, on our server side).

Attributes are the span's, less those that would make a series per request or per
item (``jsonrpc.request.id``, ``mcp.session.id``, ``mcp.resource.uri``, the client's
address): tool and prompt names are bounded by the config. The buckets are
``/metrics``'s (``metrics.py``): the convention's, and finer ones below 5 ms, where a
stdio call lands. Nothing is recorded unless a meter provider was set (an embedding
host's, or ``configure_from_environment``'s for ``serve``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import metrics

from supervisor.runtime.metrics import CALL_DURATION_BUCKETS_S

KEPT = frozenset(
    {
        "mcp.method.name",
        "gen_ai.operation.name",
        "gen_ai.tool.name",
        "gen_ai.prompt.name",
        "error.type",
        "rpc.response.status_code",
        "network.transport",
        "mcp.protocol.version",
        "server.address",
        "server.port",
        "mcp_supervisor.server",
    }
)
"""The span attributes a metric keeps (``mcp_supervisor.server``: which server)."""


class OtelMetrics:
    """The four histograms, over one meter."""

    def __init__(self, meter: metrics.Meter) -> None:
        def histogram(name: str, what: str) -> metrics.Histogram:
            return meter.create_histogram(
                name, "s", what, explicit_bucket_boundaries_advisory=CALL_DURATION_BUCKETS_S
            )

        self.client_operation = histogram(
            "mcp.client.operation.duration", "An MCP request we sent a server, until its answer."
        )
        self.server_operation = histogram(
            "mcp.server.operation.duration", "An MCP request a client sent us, until our answer."
        )
        self.client_session = histogram(
            "mcp.client.session.duration", "A connection to a server, from its start until it closed."
        )
        self.server_session = histogram(
            "mcp.server.session.duration", "A gateway client's session, from initialize until it ended."
        )

    def operation(self, server_side: bool, seconds: float, span: Any) -> None:
        """One request's duration, with what its span says of it."""
        attributes = getattr(span, "attributes", None)  # an SDK span's; another API's: none
        kept = (
            {} if not isinstance(attributes, Mapping) else {k: v for k, v in attributes.items() if k in KEPT}
        )
        (self.server_operation if server_side else self.client_operation).record(seconds, kept)


def meter_provider_is_set() -> bool:
    """Whether a meter provider was set as the global one (not the API's proxy)."""
    provider = metrics.get_meter_provider()
    proxy = type(provider).__name__ == "_ProxyMeterProvider"  # the API's stand-in until one is set
    return not proxy and not isinstance(provider, metrics.NoOpMeterProvider)


def otel_metrics() -> OtelMetrics | None:
    """The histograms over the global meter provider, or None when none was set."""
    if not meter_provider_is_set():
        return None
    return OtelMetrics(metrics.get_meter("trio-mcp-supervisor"))
