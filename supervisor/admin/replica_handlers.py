"""The admin API's handlers of replicas: readiness (``GET /v1/ready``, public, for a
load balancer's health check) and the replicas sharing the store (``GET
/v1/replicas``, read from their heartbeat rows: ``supervisor/cluster/heartbeats.py``).
``AdminApi`` inherits them.

Readiness is not liveness (``/v1/health``): a replica that drains (SIGTERM), is still
starting, or cannot write its heartbeat is alive but should get no new traffic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import trio
from quart_trio.wrappers import TrioResponse

from supervisor.cluster.heartbeats import STORE_ERRORS
from supervisor.store.cluster_rows import ReplicaRow
from supervisor.web.errors import ApiError

if TYPE_CHECKING:
    from supervisor.cluster.heartbeats import Heartbeats
    from supervisor.service import Supervisor

READ_TIMEOUT_S = 5.0
DRAINING = "draining: this process is stopping"


class _Api(Protocol):
    supervisor: Supervisor
    draining: bool

    def _json(
        self, data: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> TrioResponse: ...


class ReplicaHandlers:
    """``GET /v1/ready`` and ``GET /v1/replicas`` (mixed into ``AdminApi``)."""

    draining = False
    """Set by ``serve`` when its drain begins (a single process has no heartbeats to say so)."""

    async def ready(self: _Api) -> TrioResponse:
        heartbeats = self.supervisor.heartbeats
        reason = heartbeats.unready() if heartbeats is not None else None
        if reason is None and self.draining:
            reason = DRAINING
        if reason is None:
            return self._json({"ready": True})
        error = {"code": "not_ready", "message": reason}
        return self._json({"ready": False, "reason": reason, "error": error}, 503, {"Retry-After": "1"})

    async def list_replicas(self: _Api) -> TrioResponse:
        heartbeats = self.supervisor.heartbeats
        if heartbeats is None:
            return self._json({"clustered": False, "replicas": []})
        rows: list[ReplicaRow] = []
        with trio.move_on_after(READ_TIMEOUT_S):
            try:
                rows = await heartbeats.replicas()
            except STORE_ERRORS as exc:
                raise ApiError(503, "store_unavailable", f"cannot read the replicas' rows: {exc}") from None
            return self._json({"clustered": True, "replicas": [_item(row, heartbeats) for row in rows]})
        raise ApiError(503, "store_unavailable", f"the store did not answer within {READ_TIMEOUT_S:g} s")


def _item(row: ReplicaRow, heartbeats: Heartbeats) -> dict[str, Any]:
    return {
        "id": row.id,
        "incarnation": row.incarnation,
        "address": row.address,
        "state": row.state,
        "alive": row.alive,
        "heartbeat_age_s": round(row.age_s, 3),
        "started_at": row.started_at,
        "sessions": row.sessions,
        "in_flight": row.in_flight,
        "config_digest": row.config_digest,
        "config_matches": row.config_digest == heartbeats.digest,
        "self": row.incarnation == heartbeats.replica.incarnation,
    }
