"""What ``/mcp`` does with a request this replica does not hold the state of.

- A handshake-era session held by another live replica run: the request is passed on
  to it (``forward.py``) and its answer relayed. Held by a run that is gone (its
  heartbeat expired, or a drain handed it over): taken over here (``roaming.py``). Held
  by a run whose heartbeat is fresh but which refuses connections (killed a moment
  ago): wait, at most the TTL, for the heartbeat to expire, then take it over.
- A new-era retry (``requestState``) of a call another replica run holds: passed on to
  that run, which holds the parked call; a call whose run is gone ended with it, and
  the client is told to send its request again without the state. It is never run a
  second time here.

A request another replica passed on (``Mcp-Replica-Forwarded``, authenticated) is
never passed on again: if this replica no longer holds the session either, the client
is asked to retry (503, ``Retry-After``), and the next try finds the new holder.
Without a cluster every lookup is local, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from actors.log_events import get_logger
from supervisor.cluster.session_ids import FORWARDED_HEADER
from supervisor.gateway.forward import Lost, Unreachable, pass_on, passed_on_headers
from supervisor.gateway.http_rules import MCP_PATH, SESSION_HEADER, HttpRefusal
from supervisor.gateway.results import INVALID_PARAMS
from supervisor.gateway.roaming import Elsewhere, Roaming, SessionMoving
from supervisor.web.exchange import Request
from supervisor.web.http import Headers, Response

if TYPE_CHECKING:
    from supervisor.gateway.eras import NewEraHandler
    from supervisor.gateway.http_sessions import GatewaySession, GatewaySessions

log = get_logger("supervisor.gateway")


def _unknown(session_id: str, request_id: Any) -> HttpRefusal:
    return HttpRefusal(
        404,
        f"no MCP session {session_id!r} (unknown, ended or expired): send initialize "
        f"without {SESSION_HEADER} to open a new one",
        request_id=request_id,
    )


def _moving(session_id: str, request_id: Any) -> HttpRefusal:
    return HttpRefusal(
        503,
        f"MCP session {session_id!r} is moving between replicas: send the request again",
        request_id=request_id,
        data={"code": "session_moving"},
        headers={"Retry-After": "1"},
    )


async def _find(
    roaming: Roaming, session_id: str, tenant: str, request_id: Any
) -> GatewaySession | Elsewhere:
    """``roaming.find``, its "unknown" and "moving" as the refusals a client gets."""
    try:
        found = await roaming.find(session_id, tenant)
    except SessionMoving:
        raise _moving(session_id, request_id) from None
    if found is None:
        raise _unknown(session_id, request_id)
    return found


class PassingOn:
    """Lookups of sessions and parked calls across replicas (see the module docstring)."""

    def __init__(
        self,
        sessions: GatewaySessions,
        new_era: NewEraHandler | None,
        refuse: Callable[[HttpRefusal], Response],
    ) -> None:
        self.sessions = sessions
        self.new_era = new_era
        self.refuse = refuse

    async def held(
        self, session_id: str, tenant: str, headers: Headers, request_id: Any = None
    ) -> GatewaySession | Elsewhere:
        """The session, held here (taken over if its holder is gone), or where it is."""
        record = self.sessions.get(session_id, tenant)
        if record is not None:
            return record
        roaming = self.roaming
        if roaming is None:
            raise _unknown(session_id, request_id)
        found = await _find(roaming, session_id, tenant, request_id)
        if isinstance(found, Elsewhere) and self._forwarded(headers, session_id):
            raise _moving(session_id, request_id)  # never passed on twice
        return found

    @property
    def roaming(self) -> Roaming | None:
        """The sessions' roaming, while the replica runs (``roaming.roaming``)."""
        roaming = self.sessions.roaming
        assert roaming is None or isinstance(roaming, Roaming)
        return roaming

    def _forwarded(self, headers: Headers, session_id: str) -> bool:
        return self.sessions.ids.forwarded_by(headers.get(FORWARDED_HEADER), session_id) is not None

    async def pass_on(
        self,
        request: Request,
        body: bytes,
        session_id: str,
        tenant: str,
        elsewhere: Elsewhere,
        request_id: Any = None,
    ) -> GatewaySession | Response:
        """The holder's answer; or, when the holder turns out to be gone, the session
        taken over here (the caller answers it)."""
        roaming = self.roaming
        assert roaming is not None
        try:
            return await self._send(request, body, session_id, elsewhere)
        except Unreachable as why:
            log.info(
                "replica holding a session does not answer; waiting for its heartbeat to expire",
                extra={"fields": {"session": session_id, "replica": elsewhere.run.id, "why": str(why)}},
            )
        except Lost:
            return self._lost(elsewhere, request_id)
        if not await roaming.wait_gone(elsewhere.run, session_id):
            raise _moving(session_id, request_id)
        found = await _find(roaming, session_id, tenant, request_id)
        if isinstance(found, Elsewhere):  # taken over by another replica meanwhile
            try:
                return await self._send(request, body, session_id, found)
            except (Unreachable, Lost):
                raise _moving(session_id, request_id) from None
        return found

    async def _send(self, request: Request, body: bytes, session_id: str, elsewhere: Elsewhere) -> Response:
        address = elsewhere.run.address
        if address is None:
            raise Unreachable(f"replica {elsewhere.run.id} has no address in its heartbeat row")
        mark = self.sessions.ids.forwarded_mark(session_id)
        headers = passed_on_headers(request.headers.items(), mark)
        return await pass_on(request.method, address, MCP_PATH, headers, body)

    def _lost(self, elsewhere: Elsewhere, request_id: Any) -> Response:
        return self.refuse(
            HttpRefusal(
                502,
                f"replica {elsewhere.run.id}, which held this session, failed while answering: the "
                "request may or may not have run there; check before sending it again",
                request_id=request_id,
                data={"code": "replica_lost"},
            )
        )

    # ----------------------------------------------------------- new-era retries

    def holder_of_state(self, message: Mapping[str, Any], tenant: str) -> str | None:
        """The replica run holding the call a new-era retry's ``requestState`` names, when
        it is another run than this one (None: this one's to answer, or refuse)."""
        if self.sessions.roaming is None or self.new_era is None:
            return None
        params = message.get("params")
        state = params.get("requestState") if isinstance(params, Mapping) else None
        return None if state is None else self.new_era.holder_of(state, tenant)

    async def to_run(self, request: Request, body: bytes, holder: str, request_id: Any) -> Response:
        """A retry passed on to the run holding its parked call."""
        roaming = self.roaming
        assert roaming is not None
        run = await roaming.keeper.replica_run(holder)
        if run is not None and run.alive and run.address is not None:
            mark = self.sessions.ids.forwarded_mark(holder)
            headers = passed_on_headers(request.headers.items(), mark)
            try:
                return await pass_on(request.method, run.address, MCP_PATH, headers, body)
            except Unreachable:
                pass
            except Lost:
                return self._lost(Elsewhere(run), request_id)
        replica = holder.split(":")[0]
        return self.refuse(
            HttpRefusal(
                400,
                f"requestState names a call held by replica {replica}, which stopped: the call ended "
                "with it and did not run again; send the request again without requestState",
                code=INVALID_PARAMS,
                request_id=request_id,
            )
        )
