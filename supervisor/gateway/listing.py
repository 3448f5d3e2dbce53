"""The gateway as the admin API lists it (``web/listings.py``): its handshake-era
sessions, its per-request-era tenant states, and its metric families, both eras'.

A 2026-07-28 client has no session, but what its requests share is per tenant (and
signed-in person) state (``tenants.py``): activations, "for the session" approvals,
calls parked between input-required rounds. ``GET /v1/gateway/sessions`` lists each
such state as a row of its own (``era: "2026-07-28"``) after the handshake-era
sessions, whose rows stay as they were."""

from __future__ import annotations

import time

import trio

from actors.protocol.era import Era
from supervisor.gateway.eras import NewEraHandler
from supervisor.gateway.gauges import gateway_families
from supervisor.gateway.http_sessions import GatewaySessions, session_item
from supervisor.gateway.stateless import StatelessGateway
from supervisor.gateway.tenants import TenantState
from supervisor.runtime.metrics import Family
from supervisor.store.records import person_field
from supervisor.web.listings import Item

NEW_ERA = Era.PER_REQUEST.value


class GatewayListing:
    """``SessionListing`` over the gateway's sessions and its new-era handler."""

    def __init__(self, sessions: GatewaySessions, new_era: NewEraHandler | None) -> None:
        self.sessions = sessions
        self.new_era = new_era

    def session_items(self, scope: str | None) -> list[Item]:
        items = [session_item(record) for record in self.sessions.listing(scope)]
        if isinstance(self.new_era, StatelessGateway):
            now, clock = time.time(), trio.current_time()
            items += [tenant_state_item(state, now, clock) for state in self.new_era.tenants.listing(scope)]
        return items

    def families(self) -> list[Family]:
        return gateway_families(self.sessions, self.new_era)


def tenant_state_item(state: TenantState, now: float, clock: float) -> Item:
    """One new-era tenant state as ``GET /v1/gateway/sessions`` lists it: ``now`` is the
    wall clock (its age), ``clock`` Trio's (how long it has been unused)."""
    session, core = state.session, state.core
    return {
        "session_id": session.id,
        "era": NEW_ERA,
        "protocol_version": state.protocol_version,
        "client": state.client,
        "tenant": state.tenant,
        **person_field(state.person, state.tenant),
        "age_s": round(now - state.opened_at, 3),
        "idle_s": 0.0 if state.users else round(max(0.0, clock - state.touched), 3),
        "turns": core.turns,
        "in_flight": core.in_flight,
        "parked": len(state.parked),
        "activated": [tool for tool in session.activated if tool not in session.pinned],
        "approvals": [
            {"permission": permission, "decision": str(action)}
            for (permission, _print), action in session.memory.items()
        ],
        "servers": sorted(core.catalog().servers),
    }
