"""BridgeHub: every bridge session of this ``serve``, its bounds, and what operators see.

The hub is a registry, not a task owner: each session runs in the nursery of the
socket that opened it (``link.py``), so a socket that goes away takes its sessions'
processes down with it (the stdio teardown: group SIGTERM, SIGKILL, reap). What the
hub keeps is what spans sockets: the per-tenant session bound, the global process
cap (a session counts until its process is reaped, and so does each warm spare of a
``bridge: true`` server, see below), the listing of
``GET /v1/bridge/sessions``, and the drain that closes every socket at shutdown.

Each session leaves two audit rows in the store's audit trail, like a call: one when
it is opened (or refused), one when it is closed. Their ``tool`` is ``bridge:open`` /
``bridge:close``; ``outcome`` the result (``ok``, an error code, or the close's
reason); ``duration_ms`` the session's life; on the close row ``args_bytes`` and
``result_bytes`` hold the message counts (client to server, server to client). The
same facts go out as ``bridge_session_opened`` / ``bridge_session_closed`` events to
the tenant's stream, and into ``/metrics``.

Warm spares under the cap: the cap is the warm pool's (``runtime/process_cap.py``);
the hub reports its sessions to it and opens it, so that spares of exported servers
fill only what sessions leave of ``bridge.max_processes``. An open
takes its server's spare at once (``reserve``: it moves from spare to session, counted
once); an open that finds the cap full while another server's spare idles evicts that
spare and spawns in its place once it is reaped (sessions before spares). Each ended
session nudges the pool, which refills while there is room.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from actors.log_events import get_logger
from actors.protocol.bridge_envelope import FrameId
from actors.spec import ServerSpec
from actors.transports.connector import TransportConnector
from actors.transports.raw_stdio import RawStdio
from actors.transports.spawned import Spawned
from supervisor.bridge.peers import PeerRegistry, Refused
from supervisor.bridge.stdin_feed import StdinFeed
from supervisor.calls.audit_trail import AuditTrail
from supervisor.runtime.metrics import Family, labels
from supervisor.runtime.process_cap import counts_toward_cap
from supervisor.settings.model import BridgeSettings
from supervisor.store import AuditRow

if TYPE_CHECKING:
    from supervisor.service import Supervisor

log = get_logger("supervisor.bridge")

LOCAL_PEER = "local"


class Counted(Protocol):
    """What the records read of a session, local (``BridgeSession``) or relayed."""

    id: str
    tenant: str
    server: str
    born: float
    messages_in: int
    messages_out: int
    person: str | None


class Shuttable(Protocol):
    """A socket the hub can close (``link.BridgeLink``)."""

    def shut(self, code: int, reason: str) -> None: ...


@attrs.define(eq=False)
class BridgeSession:
    """One client session and its process. Counts and state change as it runs."""

    id: str
    tenant: str
    server: str
    client: str
    born: float  # trio time
    opened_at: float  # unix time
    feed: StdinFeed | None = None  # the process's stdin, once it runs
    state: str = "starting"
    pid: int | None = None
    messages_in: int = 0
    messages_out: int = 0
    close_reason: str | None = None
    close_id: FrameId | None = None  # the id of the client's close, echoed in the answer
    person: str | None = None  # who signed in (None: the tenant's name)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    spare: Spawned | None = None  # its server's warm spare, taken at the open, not yet adopted
    evicted: Spawned | None = None  # another server's spare whose place under the cap it took

    def hand_over(self, spec: ServerSpec) -> Spawned | None:
        """The transport's take (``SpareSource``): the spare taken at the open, once."""
        spare, self.spare = self.spare, None
        return spare

    def close(self, reason: str) -> None:
        """End the session (its process stops); the first reason given is kept."""
        if self.close_reason is None:
            self.close_reason = reason
        if self.state == "open":
            self.state = "closing"
        self.scope.cancel()


class BridgeHub:
    """The bridge sessions of one admin server (see the module docstring)."""

    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        replica = supervisor.replica.id if supervisor.replica is not None else None
        self._audit = AuditTrail(supervisor.journal, replica)
        self._sessions: dict[str, BridgeSession] = {}
        self._links: set[Shuttable] = set()
        self.counts: Counter[str] = Counter()  # opened, refused:<code>, closed:<reason>
        self.closing = False
        self.peers = PeerRegistry(self)
        self._cap = supervisor.warm.cap
        self._cap.open()
        supervisor.warm.nudge()  # the bridge's spares may start now, under the cap

    @property
    def settings(self) -> BridgeSettings:
        return self._supervisor.config.bridge

    @property
    def max_message_bytes(self) -> int:
        """The frame bound: the bridge's own, else the gateway's."""
        config = self._supervisor.config
        return config.bridge.max_message_bytes or config.gateway.max_message_bytes

    @property
    def processes(self) -> int:
        """Bridged processes alive or being torn down: sessions' and warm spares'."""
        return self._cap.processes

    # ------------------------------------------------------------------ sockets

    def attach(self, link: Shuttable) -> None:
        self._links.add(link)

    def detach(self, link: Shuttable) -> None:
        self._links.discard(link)

    def close_all(self, reason: str = "shutdown") -> None:
        """Refuse new opens and close every socket (their processes stop)."""
        self.closing = True
        for link in list(self._links):
            link.shut(1001, reason)

    # ----------------------------------------------------------------- sessions

    def reserve(
        self, tenant: str, server: str, client: str, person: str | None = None
    ) -> tuple[BridgeSession, ServerSpec]:
        """A new session of ``server`` for ``tenant`` (made for ``person``), counted at
        once; Refused (and audited) when the hub will not open it."""
        warm = self._supervisor.warm
        try:
            spec = self._check(tenant, server)
            # No checkpoint from here until the session holds what it takes.
            spare, evicted = warm.take(spec), None
            if spare is None and self._cap.full:
                evicted = warm.evict(counts_toward_cap)
                if evicted is None:
                    raise Refused(
                        "too_many_processes",
                        f"the hub runs {self.processes} bridged processes, its cap "
                        "(bridge.max_processes); retry when a session has closed",
                    )
        except Refused as refused:
            self.refused(tenant, server, refused, person)
            raise
        session = BridgeSession(
            id=secrets.token_urlsafe(12),
            tenant=tenant,
            server=server,
            client=client,
            born=trio.current_time(),
            opened_at=time.time(),
            spare=spare,
            evicted=evicted,
            person=person,
        )
        self._sessions[session.id] = session
        self._cap.session_started()
        return session, spec

    def exports(self, server: str) -> bool:
        """Whether a local ``bridge: true`` entry serves ``server`` (else a peer may)."""
        return any(
            s.name == server and s.bridge and s.type == "local" for s in self._supervisor.config.servers
        )

    def _check(self, tenant: str, server: str) -> ServerSpec:
        self.check_open(tenant)
        spec = next((s for s in self._supervisor.config.servers if s.name == server), None)
        if spec is None or not spec.bridge or spec.type != "local":
            raise Refused(
                "not_exported",
                f"no server {server!r} is exported through the bridge (only servers configured "
                "with bridge: true are)",
            )
        if not spec.enabled:
            raise Refused("disabled", f"server {server!r} is disabled in the config")
        if not isinstance(self._supervisor.connector, TransportConnector):
            raise Refused("unavailable", "this supervisor cannot start local processes for the bridge")
        return spec

    def check_open(self, tenant: str) -> None:
        """Refused when the hub is closing or ``tenant`` holds its bound of sessions
        (its own processes and the ones relayed to peers together)."""
        if self.closing:
            raise Refused("shutting_down", "the hub is shutting down; connect again later")
        held = sum(1 for s in self._sessions.values() if s.tenant == tenant) + self.peers.held(tenant)
        if held >= self.settings.max_sessions_per_tenant:
            raise Refused(
                "too_many_sessions",
                f"tenant {tenant!r} holds {held} bridge sessions, the bound "
                f"(bridge.max_sessions_per_tenant); close one first",
            )

    def refused(self, tenant: str, server: str, refused: Refused, person: str | None = None) -> None:
        """An open the hub would not serve (audited ``deny``, counted by its code)."""
        self._audit_row("bridge:open", tenant, "", server, "deny", refused.code, 0, 0, 0, person)
        self.counts[f"refused:{refused.code}"] += 1

    @asynccontextmanager
    async def open_process(self, session: BridgeSession, spec: ServerSpec) -> AsyncIterator[RawStdio]:
        """The session's process, under the supervisor's own hub, pidfiles and teardown:
        the warm spare it took at the open, raw, or a new one (spawned once the spare
        whose place it took is reaped)."""
        connector = self._supervisor.connector
        assert isinstance(connector, TransportConnector)  # checked by reserve
        try:
            if session.evicted is not None:
                await session.evicted.aclose()
                session.evicted = None
            async with connector.open_raw(spec, session.hand_over) as child:
                yield child
        finally:
            with trio.CancelScope(shield=True):  # what it took and never adopted
                for left in (session.evicted, session.hand_over(spec)):
                    if left is not None:
                        await left.aclose()
            session.evicted = None

    def opened(self, session: BridgeSession) -> None:
        """The process runs: audit, event, metrics."""
        session.state = "open"
        self.record_opened(session, LOCAL_PEER, pid=session.pid)

    def ended(self, session: BridgeSession, failed: str | None = None) -> None:
        """The process is gone (or never started: ``failed`` is its error code)."""
        if self._sessions.pop(session.id, None) is None:
            return
        self._cap.session_ended()
        self._supervisor.warm.nudge()  # its place under the cap may go to a spare
        if session.state == "starting":
            self.record_ended(session, LOCAL_PEER, failed or "spawn_failed", opened=False)
        else:
            self.record_ended(session, LOCAL_PEER, session.close_reason or "socket_closed")

    # The records of a session, local or relayed (``peers.PeerRegistry`` calls them too).

    def record_opened(self, session: Counted, peer: str, **fields: Any) -> None:
        spent = _ms(trio.current_time() - session.born)
        server = _served(session.server, peer)
        self._audit_row(
            "bridge:open", session.tenant, session.id, server, "allow", "ok", spent, 0, 0, session.person
        )
        self.counts["opened"] += 1
        self._publish(session, peer, "bridge_session_opened", fields)

    def record_ended(self, session: Counted, peer: str, reason: str, *, opened: bool = True) -> None:
        """A session's end: the close's row, event and count; or, for one that never
        opened, the open's row with ``reason`` as its error code."""
        tenant, server = session.tenant, _served(session.server, peer)
        if not opened:
            self._audit_row(
                "bridge:open", tenant, session.id, server, "allow", reason, 0, 0, 0, session.person
            )
            self.counts[f"refused:{reason}"] += 1
            return
        life = _ms(trio.current_time() - session.born)
        row = (tenant, session.id, server, "none", reason, life, session.messages_in, session.messages_out)
        self._audit_row("bridge:close", *row, session.person)
        self.counts[f"closed:{reason}"] += 1
        fields = {"reason": reason, "duration_ms": life}
        fields |= {"messages_in": session.messages_in, "messages_out": session.messages_out}
        self._publish(session, peer, "bridge_session_closed", fields)

    # ---------------------------------------------------------------- listings

    def listing(self, scope: str | None) -> list[dict[str, Any]]:
        """The sessions of tenant ``scope`` (None: every tenant's), oldest first."""
        now = trio.current_time()
        return [
            {
                "session_id": s.id,
                "server": s.server,
                "tenant": s.tenant,
                "peer": LOCAL_PEER,
                "client": s.client,
                "age_s": round(now - s.born, 3),
                "messages_in": s.messages_in,
                "messages_out": s.messages_out,
                "pid": s.pid,
                "state": s.state,
            }
            for s in self._sessions.values()
            if scope is None or s.tenant == scope
        ] + self.peers.session_listing(scope)

    def families(self) -> list[Family]:
        """The bridge's metric families for ``Metrics.render(extra=...)``."""
        counts = self.counts
        opens = {"ok": counts["opened"]}
        opens |= {key.split(":", 1)[1]: n for key, n in counts.items() if key.startswith("refused:")}
        closes = {key.split(":", 1)[1]: n for key, n in counts.items() if key.startswith("closed:")}
        return [
            Family("mcp_supervisor_bridge_sessions", "gauge",
                   "Open bridge sessions (local processes and sessions relayed to peers).",
                   [("", len(self._sessions) + len(self.peers.sessions))]),
            Family("mcp_supervisor_bridge_processes", "gauge",
                   "Bridged processes under bridge.max_processes: sessions' and warm spares'.",
                   [("", self.processes)]),
            Family("mcp_supervisor_bridge_opens_total", "counter",
                   "Bridge session opens by outcome (ok or the refusal's code).",
                   [(labels(outcome=k), n) for k, n in sorted(opens.items())]),
            Family("mcp_supervisor_bridge_closes_total", "counter", "Bridge sessions closed, by reason.",
                   [(labels(reason=k), n) for k, n in sorted(closes.items())]),
        ]  # fmt: skip

    # ------------------------------------------------------------------ records

    def _audit_row(
        self,
        tool: str,
        tenant: str,
        session: str,
        server: str,
        decision: str,
        outcome: str,
        duration_ms: int,
        messages_in: int,
        messages_out: int,
        person: str | None,
    ) -> None:
        at, record = time.time(), self._audit.new_id()
        row = (tenant, session, tool, server, decision, outcome, duration_ms, "", messages_in, messages_out)
        self._audit.finished(AuditRow(at, *row, record, None, person or tenant))  # None: the tenant

    def _publish(self, session: Counted, peer: str, kind: str, fields: Mapping[str, Any]) -> None:
        event = {"type": kind, "tenant": session.tenant, "session": session.id, "server": session.server}
        self._supervisor.events.publish({**event, "peer": peer, **fields})


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def _served(server: str, peer: str) -> str:
    """The audit row's ``server``: the name, and the peer that runs it if not this hub."""
    return server if peer == LOCAL_PEER else f"{server}@{peer}"
