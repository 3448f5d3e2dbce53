"""Who may do what: one pure check for every way into the supervisor.

A request is made by a ``Principal`` (a tenant, in a role) and needs an ``Action``.
Every admin route names its action in ``openapi.ROUTES``, and the app's guard asks
``authorize(principal, route.action)`` before any handler runs; a route without an
action is refused for everyone (fail closed), and a test walks every route the app
serves. Later ways in (an MCP gateway, the bridge) name their action
and ask the same question.

The roles (``settings.model.Role``):

* ``operator``: everything a tenant may do, in its own tenant; plus server control
  (restart, enable, disable, and ``POST /v1/config/reload``), the metrics, and every
  tenant's view (``EVERY_TENANT``): it lists and answers every tenant's approvals,
  lists and closes every tenant's sessions, and its event stream carries every
  tenant's call and approval events, and reads untrusted tools' full descriptions
  in ``/v1/tools?full=1`` (a tenant's listings carry them cut; a search in one of
  its turns carries the matches' full text). It does not work *inside* another tenant's
  session (turns, calls, searches): those stay the session's own, and are audited
  under its tenant. Request ids are per tenant, so it cancels its own requests by
  request id; by the supervisor's call id (``POST /v1/calls/{call_id}/cancel``) it
  cancels any tenant's call, and the call's audit row names it.
* ``tenant``: its own sessions, turns, calls, approvals and requests, plus read-only
  server state (servers, tools, the event stream's state changes, this document).
* ``peer``: registering servers as a bridge peer on ``/v1/bridge`` (``BRIDGE``), and
  answering the sessions the hub opens on it; nothing else.

Everyone reaches ``PUBLIC`` (the health check) once the Host and Origin gates pass.
Objects of another tenant answer 404, not 403, in every role, so ids do not leak; a
403 says only that the *role* is not enough, and which roles are.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from supervisor.settings.model import DEFAULT_TENANT, Role

__all__ = ["GRANTS", "Action", "Principal", "Role", "allowed_roles", "authorize", "denial_message"]


class Action(enum.StrEnum):
    """What a request needs to be allowed to do."""

    PUBLIC = "public"  # liveness, for anyone past the Host and Origin gates
    READ_STATE = "read_state"  # servers, tools, the API document, the event stream
    USE_SESSIONS = "use_sessions"  # own sessions, turns, calls, search, approvals, requests
    CONTROL_SERVERS = "control_servers"  # restart, enable, disable, config reload
    READ_METRICS = "read_metrics"  # counters across every tenant
    EVERY_TENANT = "every_tenant"  # see (and answer, close) every tenant's objects
    FULL_DESCRIPTIONS = "full_descriptions"  # /v1/tools?full=1: untrusted descriptions uncut
    BRIDGE = "bridge"  # register servers as a bridge peer


GRANTS: Mapping[Role, frozenset[Action]] = {
    Role.OPERATOR: frozenset(
        {
            Action.PUBLIC,
            Action.READ_STATE,
            Action.USE_SESSIONS,
            Action.CONTROL_SERVERS,
            Action.READ_METRICS,
            Action.EVERY_TENANT,
            Action.FULL_DESCRIPTIONS,
        }
    ),
    Role.TENANT: frozenset({Action.PUBLIC, Action.READ_STATE, Action.USE_SESSIONS}),
    Role.PEER: frozenset({Action.PUBLIC, Action.BRIDGE}),
}


@attrs.frozen(slots=True)
class Principal:
    """Who a request speaks for. A signed-in caller also has ``person`` (its token's
    person claim) and ``token`` (the raw access token, never shown or compared); a
    static-token caller has neither: its person is its tenant's name."""

    tenant: str
    role: Role
    person: str | None = None
    token: str | None = attrs.field(default=None, repr=False, eq=False)

    @property
    def scope(self) -> str | None:
        """Whose objects it sees: its tenant's, or (None) every tenant's."""
        return None if authorize(self, Action.EVERY_TENANT) else self.tenant


# With no tokens configured, a loopback client is the operator of the default tenant.
LOOPBACK_OPERATOR = Principal(DEFAULT_TENANT, Role.OPERATOR)


def authorize(principal: Principal, action: Action | None) -> bool:
    """Whether ``principal`` may do ``action`` (None, an unknown action: nobody may)."""
    return action is not None and action in GRANTS[principal.role]


def allowed_roles(action: Action | None) -> tuple[Role, ...]:
    """The roles that may do ``action``, in the order of ``Role``."""
    return tuple(role for role in Role if action is not None and action in GRANTS[role])


def denial_message(principal: Principal, action: Action | None, what: str) -> str:
    """A 403's message: what was refused, which roles may do it, and which role this is."""
    roles = allowed_roles(action)
    if not roles:
        return f"{what} is not open to any role"
    needed = " or ".join(role.value for role in roles)
    return f"{what} needs the {needed} role; this token has the {principal.role.value} role"
