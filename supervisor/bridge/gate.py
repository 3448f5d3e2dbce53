"""Who may open a bridge socket, decided before it is accepted (pure).

The guard's gates (``web/auth.py``: Host, then the bearer token and its role)
with two differences a browser needs:

- ``Origin`` may be a loopback origin or one of ``bridge.allowed_origins``; anything
  else is a 403 before the upgrade.
- A browser cannot set ``Authorization`` on a WebSocket. It may offer the token as a
  subprotocol, ``mcp-supervisor.token.<token>`` (next to ``mcp-supervisor.bridge.v1``,
  which is the one the hub echoes, so the token never comes back in a header), or send
  it in a first ``auth`` frame: a socket that presented no credential at all is
  accepted and must authenticate within ``AUTH_TIMEOUT_S``.

A token that was presented and is wrong is refused before the upgrade (401), like a
request to the admin API. With sign-in on, a token that is no static one is
``Presented``: the app has sign-in check it (I/O), then ``role_denial``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from supervisor.web.auth import Denial, Presented, TokenBook, check_request, origin_is_loopback
from supervisor.web.guard import client_is_loopback, request_target
from supervisor.web.roles import Action, Principal, authorize, denial_message

SUBPROTOCOL = "mcp-supervisor.bridge.v1"
TOKEN_PREFIX = "mcp-supervisor.token."
AUTH_TIMEOUT_S = 10.0
ACTION = Action.USE_SESSIONS


@attrs.frozen(slots=True)
class Admit:
    """Accept the socket, echoing ``subprotocol``; ``principal`` None: it must send an
    ``auth`` frame first."""

    principal: Principal | None
    subprotocol: str | None


def origin_allowed(origin: str, allowed: Sequence[str]) -> bool:
    """A loopback web origin, or one the config lists (compared without case)."""
    return origin_is_loopback(origin) or origin.lower() in allowed


def choose_subprotocol(offered: Sequence[str]) -> str | None:
    """Ours when offered; else the token's (a client that offered only that one fails
    the handshake unless it is echoed); else none."""
    if SUBPROTOCOL in offered:
        return SUBPROTOCOL
    return next((p for p in offered if p.startswith(TOKEN_PREFIX)), None)


def role_denial(principal: Principal) -> Denial | None:
    """The 403 for a role that may neither open bridge sessions nor register as a peer."""
    if authorize(principal, ACTION) or authorize(principal, Action.BRIDGE):
        return None
    return Denial(403, "forbidden", denial_message(principal, ACTION, "the bridge"))


def admit(
    *,
    hosts: Sequence[str],
    origins: Sequence[str],
    authorizations: Sequence[str],
    subprotocols: Sequence[str],
    tokens: TokenBook,
    allowed_origins: Sequence[str],
    bind_is_loopback: bool,
    target: str = "/v1/bridge",
    client_is_loopback: bool = False,
    signin: bool = False,
) -> Admit | Presented | Denial:
    """Origin, then Host and the token (header or subprotocol), then the role."""
    if origins and (len(origins) != 1 or not origin_allowed(origins[0], allowed_origins)):
        shown = origins[0] if len(origins) == 1 else f"{len(origins)} Origin headers"
        return Denial(
            403,
            "forbidden",
            f"origin {shown!r} may not use the bridge; add it to bridge.allowed_origins in the config",
        )
    offered = [p[len(TOKEN_PREFIX) :] for p in subprotocols if p.startswith(TOKEN_PREFIX)]
    if len(offered) > 1:
        return Denial(400, "bad_request", "offer at most one mcp-supervisor.token.<token> subprotocol")
    if offered and not authorizations:
        authorizations = [f"Bearer {offered[0]}"]
    verdict = check_request(
        public=False,
        hosts=hosts,
        origins=(),
        authorizations=authorizations,
        tokens=tokens,
        bind_is_loopback=bind_is_loopback,
        target=target,
        client_is_loopback=client_is_loopback,
        signin=signin,
    )
    if isinstance(verdict, Presented):
        return verdict
    if isinstance(verdict, Denial):
        if verdict.status == 401 and not authorizations:
            return Admit(None, choose_subprotocol(subprotocols))
        return verdict
    assert verdict.principal is not None  # not public: a principal or a denial
    return role_denial(verdict.principal) or Admit(verdict.principal, choose_subprotocol(subprotocols))


def admit_scope(
    scope: Mapping[str, Any],
    *,
    tokens: TokenBook,
    allowed_origins: Sequence[str],
    bind_is_loopback: bool,
    signin: bool = False,
) -> Admit | Presented | Denial:
    """``admit`` on a WebSocket's ASGI scope (its raw headers, as Hypercorn gives them)."""
    headers: Sequence[tuple[bytes, bytes]] = scope.get("headers", ())

    def values(name: bytes) -> list[str]:
        return [value.decode("latin-1") for key, value in headers if key.lower() == name]

    return admit(
        hosts=values(b"host"),
        origins=values(b"origin"),
        authorizations=values(b"authorization"),
        subprotocols=list(scope.get("subprotocols", ())),
        tokens=tokens,
        allowed_origins=allowed_origins,
        bind_is_loopback=bind_is_loopback,
        target=request_target(scope),
        client_is_loopback=client_is_loopback(scope),
        signin=signin,
    )


def client_address(scope: Mapping[str, Any]) -> str:
    """``host:port`` of the socket's peer, as the listings show it."""
    client = scope.get("client")
    if isinstance(client, list | tuple) and len(client) == 2:
        return f"{client[0]}:{client[1]}"
    return "unknown"
