"""The gateway's metric families: sessions open by era, opened / closed / expired /
refused, new-era tenants held, and requests being answered, so an operator sees on
``/metrics`` what ``GET /v1/gateway/sessions`` lists one by one."""

from __future__ import annotations

from supervisor.gateway.eras import NewEraHandler
from supervisor.gateway.http_sessions import GatewaySessions
from supervisor.gateway.stateless import StatelessGateway
from supervisor.runtime.metrics import Family, labels

SESSION_OUTCOMES = ("opened", "closed", "expired", "refused")


def gateway_families(sessions: GatewaySessions, new_era: NewEraHandler | None) -> list[Family]:
    """The families for ``Metrics.render(extra=...)``; counters across every tenant."""
    open_sessions = sessions.listing(None)
    in_flight = sum(record.peer.core.in_flight for record in open_sessions)
    tenants = 0
    if isinstance(new_era, StatelessGateway):
        tenants = len(new_era.tenants)
        in_flight += new_era.tenants.in_flight()
    return [
        Family(
            "mcp_supervisor_gateway_sessions",
            "gauge",
            "Open /mcp sessions (handshake era).",
            [("", len(open_sessions))],
        ),
        Family(
            "mcp_supervisor_gateway_sessions_total",
            "counter",
            "/mcp sessions by outcome: opened (initialized), closed, expired (idle), "
            "refused (over the tenant's bound).",
            [(labels(outcome=outcome), sessions.counts[outcome]) for outcome in SESSION_OUTCOMES],
        ),
        Family(
            "mcp_supervisor_gateway_tenants",
            "gauge",
            "Tenants whose per-request-era state (activations, approvals) the gateway holds.",
            [("", tenants)],
        ),
        Family(
            "mcp_supervisor_gateway_requests_in_flight",
            "gauge",
            "MCP requests the gateway is answering, both eras.",
            [("", in_flight)],
        ),
    ]
