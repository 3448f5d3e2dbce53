"""The admin API's handlers of remembered "always" answers: list them, and revoke one,
so an operator of ``serve`` (or a tenant, its own) can take back an approval without a
restart; on a shared PostgreSQL store the revocation reaches every supervisor
(docs/deployment.md). ``AdminApi`` inherits them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from quart import request
from quart_trio.wrappers import TrioResponse

from supervisor.admin.caller import principal
from supervisor.web.errors import ApiError, not_found

if TYPE_CHECKING:
    from supervisor.service import Supervisor


class _Api(Protocol):
    supervisor: Supervisor

    def _json(
        self, data: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> TrioResponse: ...


class RememberedHandlers:
    """``GET`` and ``DELETE /v1/approvals/remembered`` (mixed into ``AdminApi``)."""

    async def list_remembered(self: _Api) -> TrioResponse:
        kept = self.supervisor.policy.remembered(principal().scope)
        items = [{"tenant": t, "permission": p, "decision": d} for t, p, d in kept]
        return self._json({"remembered": items})

    async def forget_remembered(self: _Api) -> TrioResponse:
        permission = request.args.get("permission", "")
        if not permission:
            raise ApiError(400, "bad_request", "name the answer: ?permission=mcp:<server>:<tool>")
        who = principal()
        tenant = request.args.get("tenant") or who.tenant
        if who.scope is not None and tenant != who.tenant:  # another tenant's: as if absent
            raise not_found(f"remembered answer for {permission!r}")
        if (tenant, permission) not in {(t, p) for t, p, _ in self.supervisor.policy.remembered(tenant)}:
            raise not_found(f"remembered answer for {permission!r}")
        self.supervisor.policy.forget_always(tenant, permission)
        return TrioResponse(b"", status=204)
