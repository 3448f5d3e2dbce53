"""A handshake-era gateway session's restorable state, taken from its peer and given
to a fresh one (a takeover: ``roaming.py``; the state itself: ``cluster/session_state.py``)."""

from __future__ import annotations

from actors.router.trust import Action
from supervisor.cluster.session_state import SessionState
from supervisor.gateway.peer import GatewayPeer


def snapshot(peer: GatewayPeer) -> SessionState:
    """The session's restorable state now."""
    session = peer.session
    core = peer.core
    return SessionState(
        protocol_version=peer.protocol_version or "",
        client_info=dict(peer.client_info) if peer.client_info is not None else None,
        client_capabilities=dict(peer.client_capabilities),
        log_level=core.log_level,
        activated=tuple(session.activated.items()),
        approvals=tuple((p, f, str(a)) for (p, f), a in session.memory.items()),
        shown=tuple((kind, view.decode()) for kind, view in core.shown.items()),
        elicitations=tuple(sorted(core.elicitations)),
        turns=core.turns,
    )


def restore(peer: GatewayPeer, state: SessionState) -> None:
    """Make a fresh session what ``state`` says (before its first request here)."""
    session = peer.session
    peer.mcp.resume(state.protocol_version, state.client_info, dict(state.client_capabilities))
    core = peer.core
    core.log_level = state.log_level
    core.shown = {kind: view.encode() for kind, view in state.shown}
    core.elicitations = set(state.elicitations)
    core.turns = state.turns
    session.activated.update(dict(state.activated))
    session.memory.update({(p, f): Action(a) for p, f, a in state.approvals})


def fingerprint(peer: GatewayPeer) -> int:
    """Cheap to take after every request: changes when the restorable state does."""
    core, session = peer.core, peer.session
    return hash(
        (
            tuple(session.activated),
            tuple(session.memory.items()),
            core.log_level,
            tuple(core.shown.values()),
            frozenset(core.elicitations),
        )
    )
