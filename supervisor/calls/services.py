"""What a turn's calls may use: the supervisor's parts, and their session's side.

A ``Turn`` (``supervisor.calls.turns``) is given both: ``CallServices``, built once with
the supervisor, and its session as a ``TurnSession`` (``supervisor.sessions.session.Session``
is one). The turn declares what it needs here, and the session and the service
provide it, so imports go one way: service → sessions → turns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

import attrs

from actors.broadcast import Broadcast
from actors.connection.client_side import ClientSide
from actors.connection.messages import CallOutcome
from actors.mailbox import Channels
from actors.router.catalog import ServerView, ToolEntry
from actors.router.trust import Action, Decision
from supervisor.calls.audit_trail import AuditTrail
from supervisor.calls.exposure import Exposures
from supervisor.calls.in_flight import CallsInFlight
from supervisor.calls.rate_limits import RateLimits
from supervisor.calls.requests import RequestRegistry
from supervisor.runtime.latency_ring import LatencyRings
from supervisor.runtime.metrics import Metrics
from supervisor.runtime.sign_ins import SignIn
from supervisor.settings.model import Config, ToolSearchSettings, TracingSettings

_CALLING_CLIENT: ContextVar[ClientSide | None] = ContextVar("calling_client", default=None)


@contextmanager
def answered_by(client: ClientSide | None) -> Iterator[None]:
    """Within this block, the calling task's calls (tools, reads, prompt gets,
    completions) have their server requests answered by ``client`` instead of their
    session's side. The MCP gateway uses it to send a backend's sampling or elicitation
    to the stream of the very client request that caused it."""
    token = _CALLING_CLIENT.set(client)
    try:
        yield
    finally:
        _CALLING_CLIENT.reset(token)


def calling_client(session: TurnSession) -> ClientSide:
    """Who answers the server requests of a call made now: ``answered_by``'s, else
    the session's."""
    client = _CALLING_CLIENT.get()
    return session.client if client is None else client


@attrs.define(slots=True, eq=False)
class CallServices:
    """What the calls of a turn may use of the supervisor that runs them (built once,
    with the supervisor)."""

    tool_search: ToolSearchSettings
    """Replaced by a config reload (``Supervisor.reload``), its only writer."""
    requests: RequestRegistry
    """Calls in flight by (tenant, request id), so a client can cancel one."""
    audit: AuditTrail
    metrics: Metrics
    events: Broadcast[Mapping[str, Any]]
    tracing: TracingSettings = attrs.field(factory=TracingSettings)
    """What a traced call's span may carry (``supervisor/calls/span_content.py``);
    replaced by a config reload, as ``tool_search``."""
    exposure: Exposures = attrs.field(factory=Exposures)
    """What each tenant's turns may see (``exposure.py``); replaced by a reload."""
    limits: RateLimits = attrs.field(factory=RateLimits)
    """The rate limits and their buckets (``rate_limits.py``); retuned by a reload."""
    in_flight: CallsInFlight = attrs.field(factory=CallsInFlight)
    """Every call that may wait, by its server-assigned id (``in_flight.py``)."""
    latency: LatencyRings = attrs.field(factory=LatencyRings)
    """Each server's latency over the last 15 minutes (``runtime/latency_ring.py``)."""

    @classmethod
    def of(
        cls,
        config: Config,
        requests: RequestRegistry,
        audit: AuditTrail,
        metrics: Metrics,
        events: Broadcast[Mapping[str, Any]],
    ) -> CallServices:
        """What the calls of a supervisor running ``config`` use."""
        exposure, limits = Exposures(config.exposure), RateLimits(config.limits, metrics)
        return cls(config.tool_search, requests, audit, metrics, events, config.tracing, exposure, limits)

    def retune(self, config: Config, next_epoch: int) -> bool:
        """Take a reloaded config's settings for the calls made from now on. True when
        its exposure lists changed: they apply from ``next_epoch``, which the reload
        then has the router make (``RetuneServers.refresh``)."""
        self.tool_search, self.tracing = config.tool_search, config.tracing
        self.limits.retune(config.limits)
        if config.exposure == self.exposure.rules:
            return False
        self.exposure = self.exposure.replaced(config.exposure, next_epoch)
        return True


@attrs.frozen(slots=True)
class Authorization:
    """The final word on one call: ``action`` (allow or deny), what policy first said
    (``decided``: allow, ask or deny, for the audit), and why."""

    action: Action
    decided: str
    reason: str


class TurnSession(Protocol):
    """What a turn may use of its session (``supervisor.sessions.session.Session`` is one)."""

    @property
    def id(self) -> str: ...
    @property
    def client(self) -> ClientSide:
        """Who answers the server requests tied to its calls, and what they declare."""

    @property
    def tenant(self) -> str: ...
    @property
    def person(self) -> str:
        """Who its calls are made for (``docs/identity.md``)."""

    @property
    def pinned(self) -> tuple[str, ...]: ...
    @property
    def activated(self) -> Mapping[str, int]:
        """Each tool pinned or activated by a search, with its activation's number (0, 1,
        …: pinned tools first)."""

    @property
    def replies(self) -> list[Channels[CallOutcome]]:
        """Answered reply channels, for the next calls to reuse."""

    def activate(self, tool_id: str) -> None: ...

    def first_word(self, entry: ToolEntry, arguments: Any, *, trusted: bool | None = None) -> Decision:
        """What policy says of one call before anyone is asked (``trusted``: as the
        call's turn saw its server)."""

    def sign_in_needed(self, view: ServerView) -> SignIn | None:
        """Its person's own sign-in to a ``per_user`` server that waits for them, if any."""

    async def authorize(
        self, entry: ToolEntry, arguments: Any, decision: Decision | None = None
    ) -> Authorization:
        """The final word on one call, asking the host when policy says ask."""
