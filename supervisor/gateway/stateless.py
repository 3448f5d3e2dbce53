"""The gateway's front for per-request-era (2026-07-28) clients: a ``NewEraHandler``.

Such a client has no session and no handshake: every request carries, in
``params._meta``, the protocol version, the client's capabilities and (optionally)
its identity, and ``server/discover`` tells it what we serve. ``receive`` answers one
message of one HTTP request:

- Each message is read by a server session of its own (the protocol core's
  ``ServerSession`` of this era), which checks ``_meta`` on every request: without
  the version or the capabilities, -32602; a version we do not speak, -32022 with
  ``data.supported`` and ``data.requested``. Methods this era removed
  (``initialize``, ``ping``, ``logging/setLevel``, ``resources/subscribe``,
  ``resources/unsubscribe``) are -32601 from it, and unknown ones from us.
- A tenant's requests share one supervisor session (``tenants.py``): its activations
  and "for the session" approvals, with idle expiry. Its ``scope: session`` servers
  are not run: a call to one is an ``unavailable`` result that says why, and
  ``tools/list`` names them under ``_meta["mcp-supervisor/unavailable"]``.
- ``tools/call``, ``prompts/get`` and ``resources/read`` run as a ``ParkedCall`` in our
  nursery: when the backend asks the client something, the answer is an
  input-required result (``inputRequests`` and a ``requestState`` we mint and
  authenticate, ``request_state.py``); the client's retry resumes the same backend
  call. A request that needs a capability the client did not declare gets -32021.
  Each parked call is its own side of the backend's requests (``ClientSide.session``
  names the call, not the tenant): over stdio, where a request says nothing of its
  call, one that could be either of two parked calls of a tenant goes to neither.
  A tampered, foreign, stale or expired state is -32602. With a ``_meta`` logLevel, the
  servers' log messages tied to the call come on its own stream at that level, and
  its servers are asked for it while it runs (``related.wanting_logs``); without, none.
- ``subscriptions/listen`` (``listen.py``) holds the request open until the client
  hangs up.

A hang-up is a cancel: the front cancels the task running ``receive``; the backend
call it waits on is cancelled with it (its server gets ``notifications/cancelled``).
Results carry ``resultType``, the caching hints (``ttlMs: 0``, ``cacheScope:
"private"``: a listing is per tenant) and our ``serverInfo`` in ``_meta``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import trio

from actors.connection.client_side import ClientSide
from actors.protocol.era import Era
from actors.protocol.jsonrpc import to_wire
from actors.protocol.messages import (
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_PROTOCOL_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorResponse,
    Response,
)
from actors.protocol.server_session import (
    Replied,
    RequestReceived,
    ServerSession,
    error_response,
    unsupported_version,
)
from actors.router.actor import CatalogCell
from actors.spec import Scope
from supervisor.gateway.core import METHODS, GatewayCore, RequestContext
from supervisor.gateway.http_rules import HEADER_MISMATCH
from supervisor.gateway.listen import listen
from supervisor.gateway.outlet import Outlet
from supervisor.gateway.param_check import param_header_refusal
from supervisor.gateway.parked import InputRound, ParkedCall
from supervisor.gateway.related import wanting_logs
from supervisor.gateway.request_state import RequestStateKey, StateClaims, StateRefused, state_key_of
from supervisor.gateway.results import (
    ERROR_META,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    RESOURCE_NOT_FOUND,
    JsonRpcError,
)
from supervisor.gateway.tenants import TenantState, TenantStates
from supervisor.gateway.traced import HTTP, Answer, Arrival, traced
from supervisor.runtime.tracing import TRACING
from supervisor.sessions.session import Session

if TYPE_CHECKING:
    from supervisor.service import Supervisor

PARK_S = 300.0
"""How long a call waits for a client's retry between input-required rounds."""
UNAVAILABLE_META = "mcp-supervisor/unavailable"
RESUMABLE = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""The methods that may answer input-required, and the param a retry must repeat."""
CACHEABLE = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}
)


class StatelessGateway:
    """The ``NewEraHandler`` over a supervisor (see the module docstring).

    Run it (``await nursery.start(gateway.run)``) before handing it messages."""

    def __init__(
        self,
        open_session: Callable[[str, str | None], AbstractAsyncContextManager[Session]],
        cell: CatalogCell,
        *,
        prefix: bool = True,
        version: str = "0",
        instructions: str | None = None,
        idle_s: float = 1800.0,
        park_s: float = PARK_S,
        session_scoped: tuple[str, ...] = (),
        state_key: RequestStateKey | None = None,
    ) -> None:
        self._cell = cell
        self._prefix = prefix
        self.server_info = {"name": "mcp-supervisor", "version": version}
        self._instructions = instructions
        self.park_s = park_s
        self._key = state_key if state_key is not None else RequestStateKey()
        self._session_scoped = session_scoped
        self.tenants = TenantStates(open_session, self._core, idle_s)
        self._nursery: trio.Nursery | None = None

    @classmethod
    def of(cls, sup: Supervisor, *, version: str = "0", instructions: str | None = None) -> StatelessGateway:
        """The handler for ``sup``'s config (``config.gateway``)."""
        config = sup.config
        return cls(
            lambda tenant, person: sup.session(tenant=tenant, person=person),
            sup.router.cell,
            prefix=config.gateway.prefix,
            version=version,
            instructions=instructions,
            idle_s=config.gateway.session_idle_s,
            session_scoped=tuple(s.name for s in config.servers if s.scope is Scope.SESSION and s.enabled),
            state_key=state_key_of(sup.replica),
        )

    def holder_of(self, state: Any, tenant: str) -> str | None:
        """The replica run holding the call ``state`` names, if another than this one."""
        try:
            holder = self._key.read(state, tenant=tenant).holder
        except StateRefused:
            return None  # refused where it is resumed, with its reason
        return holder if holder != self._key.holder else None

    def _core(self, session: Session) -> GatewayCore:
        return GatewayCore(session, prefix=self._prefix, version=self.server_info["version"])

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the tenants' states and the parked calls until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.tenants.bind(nursery)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None
                self.tenants.bind(None)

    # ------------------------------------------------------------------ messages

    async def receive(
        self,
        message: Mapping[str, Any],
        outlet: Outlet,
        tenant: str,
        arrival: Arrival | None = None,
        person: str | None = None,
    ) -> dict[str, Any] | None:
        """The response to one message of a per-request-era client (None for a
        notification or a response: this era sends clients no requests). The era has
        no session, so each message is read by a server session of its own, which
        checks its ``_meta`` and refuses the removed methods. A request is traced
        (``traced.py``) when traces are on."""
        if TRACING.active is None:
            return await self._receive(message, outlet, tenant, person)
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, Mapping) else None
        version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, Mapping) else None
        return await traced(
            message,
            arrival or HTTP,
            lambda: self._receive(message, outlet, tenant, person),
            protocol_version=version if isinstance(version, str) else None,
        )

    async def _receive(
        self, message: Mapping[str, Any], outlet: Outlet, tenant: str, person: str | None
    ) -> Answer:
        exchange = ServerSession(era=Era.PER_REQUEST)
        event = exchange.receive(message)
        if isinstance(event, Replied):
            return to_wire(event.message)
        if not isinstance(event, RequestReceived):
            return None
        answer: Response | ErrorResponse | None
        try:
            answer = exchange.respond(event, await self._answer(event, outlet, tenant, person))
        except JsonRpcError as error:
            answer = exchange.fail(event, error)
        return None if answer is None else to_wire(answer)

    async def check_headers(
        self,
        message: Mapping[str, Any],
        param_headers: Mapping[str, str],
        tenant: str,
        person: str | None = None,
    ) -> dict[str, Any] | None:
        """The -32020 response when a ``tools/call``'s ``Mcp-Param-*`` headers do not
        repeat its arguments (``param_check.py``), else None."""
        if message.get("method") != "tools/call":
            return None
        async with self.tenants.use(tenant, person) as state:
            return await param_header_refusal(state.core, message, param_headers)

    async def _answer(
        self, request: RequestReceived, outlet: Outlet, tenant: str, person: str | None
    ) -> dict[str, Any]:
        method, params = request.method, request.params
        if method != "server/discover" and method != "subscriptions/listen" and method not in METHODS:
            raise JsonRpcError(METHOD_NOT_FOUND, f"method not found: {method}")
        async with self.tenants.use(tenant, person) as state:
            state.heard(params.get("_meta"))
            if method == "server/discover":
                await state.core.latest_turn()  # the servers it needs are up: capabilities say what is there
                return self._decorate(method, self._discover(state))
            if method == "subscriptions/listen":
                caps = state.core.capabilities()
                await listen(request.id, params, outlet, state.session, caps, self._cell, state.fanout)
                raise AssertionError("listen returns only when cancelled")  # pragma: no cover
            if method == "tools/call" and (refusal := self._session_scoped_refusal(params)) is not None:
                return self._decorate(method, refusal)
            if method in RESUMABLE:
                result = await self._resumable(state, request, outlet)
            else:
                ctx = RequestContext(outlet=outlet, progress_token=request.progress_token)
                result = await state.core.handle(method, params, ctx)
                if method == "tools/list" and self._session_scoped:
                    result.setdefault("_meta", {})[UNAVAILABLE_META] = {
                        name: self._why(name) for name in self._session_scoped
                    }
            return self._decorate(method, result)

    def _discover(self, state: TenantState) -> dict[str, Any]:
        capabilities = {k: v for k, v in state.core.capabilities().items() if k != "logging"}
        result: dict[str, Any] = {
            "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
            "capabilities": capabilities,
            "serverInfo": self.server_info,
        }
        if self._instructions:
            result["instructions"] = self._instructions
        return result

    def _decorate(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        result.setdefault("resultType", "complete")
        if method in CACHEABLE or method == "server/discover":
            result.setdefault("ttlMs", 0)
            result.setdefault("cacheScope", "private")
        meta = result.get("_meta")
        result["_meta"] = {**(meta if isinstance(meta, Mapping) else {}), META_SERVER_INFO: self.server_info}
        return result

    # ---------------------------------------------------------- scope: session

    @staticmethod
    def _why(server: str) -> str:
        return (
            f"server {server} has scope: session: it runs once per handshake-era session, and a "
            "2026-07-28 client has none; connect with initialize (protocol 2025-11-25) to use it"
        )

    def _session_scoped_refusal(self, params: Mapping[str, Any]) -> dict[str, Any] | None:
        name = params.get("name")
        if not isinstance(name, str):
            return None
        for server in self._session_scoped:
            if name.startswith(f"{server}_") or (not self._prefix and len(self._session_scoped) == 1):
                why = self._why(server)
                return {
                    "content": [{"type": "text", "text": why}],
                    "isError": True,
                    "_meta": {ERROR_META: {"code": "unavailable"}},
                }
        return None

    # ------------------------------------------------------ input-required rounds

    async def _resumable(
        self, state: TenantState, request: RequestReceived, outlet: Outlet
    ) -> dict[str, Any]:
        method, params = request.method, request.params
        target = params.get(RESUMABLE[method])
        target = target if isinstance(target, str) else ""
        responses = params.get("inputResponses")
        if "inputResponses" in params and not isinstance(responses, Mapping):
            raise JsonRpcError(
                INVALID_PARAMS, f"{method}: inputResponses must be an object of answers by key"
            )
        if params.get("requestState") is not None:
            parked = self._resume(state, method, target, params["requestState"])
            parked.answer(responses or {})
        else:
            parked = self._park(state, request, target, responses)
        try:
            return await self._attend(state, parked, outlet)
        except JsonRpcError as error:
            if error.code == RESOURCE_NOT_FOUND and method == "resources/read":
                raise JsonRpcError(
                    INVALID_PARAMS, error.message, {"uri": target, **(error.data or {})}
                ) from None
            raise

    def _park(
        self, state: TenantState, request: RequestReceived, target: str, responses: Mapping[str, Any] | None
    ) -> ParkedCall:
        method, params, capabilities = request.method, request.params, request.capabilities or {}
        if self._nursery is None:
            raise JsonRpcError(-32603, "the gateway is shutting down")
        parked = ParkedCall(
            state.tenant, method, target, capabilities, park_s=self.park_s, presupplied=responses
        )
        plain = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        meta, side = params["_meta"], f"{state.session.id}/{parked.id}"
        level = meta.get(META_LOG_LEVEL)  # its log messages, on its stream: its servers are asked
        ctx = RequestContext(
            outlet=parked.outlet,
            progress_token=request.progress_token,
            cancel_key=f"gateway-new:{parked.id}",
            client=ClientSide(side, parked.ask, dict(capabilities), log_level=level),
        )
        state.parked[parked.id] = parked
        release = self.tenants.hold(state)

        async def run() -> None:
            try:
                async with wanting_logs(state.session, parked.id, level):
                    await parked.run(lambda: state.core.handle(method, plain, ctx))
            finally:
                state.parked.pop(parked.id, None)
                release()

        self._nursery.start_soon(run)
        return parked

    def _resume(self, state: TenantState, method: str, target: str, request_state: Any) -> ParkedCall:
        try:
            claims: StateClaims = self._key.check(request_state, tenant=state.tenant, now=trio.current_time())
        except StateRefused as refused:
            raise JsonRpcError(INVALID_PARAMS, str(refused)) from None
        parked = state.parked.get(claims.call)
        if parked is None:
            raise JsonRpcError(
                INVALID_PARAMS,
                "requestState names a call that is over (it finished, was cancelled or waited too "
                "long): send the request again without requestState",
            )
        if (claims.method, claims.target) != (method, target):
            raise JsonRpcError(
                INVALID_PARAMS,
                f"requestState belongs to {claims.method} {claims.target!r}, not to this request",
            )
        if claims.round != parked.round or parked.attached:
            raise JsonRpcError(
                INVALID_PARAMS,
                "requestState of a round that was answered already: use the latest requestState",
            )
        return parked

    async def _attend(self, state: TenantState, parked: ParkedCall, outlet: Outlet) -> dict[str, Any]:
        """Wait on the parked call for this HTTP request: its answer, or the next round."""
        parked.attach(outlet)
        try:
            event = await parked.next_event()
        except BaseException:  # an error to send, or the client hung up: the call ends
            parked.cancel()
            raise
        if not isinstance(event, InputRound):
            return event
        parked.round += 1
        expires = trio.current_time() + self.park_s
        claims = StateClaims(state.tenant, parked.id, parked.round, parked.method, parked.target, expires)
        parked.detach()
        return {
            "resultType": "input_required",
            "inputRequests": {key: ask.request() for key, ask in event.asks.items()},
            "requestState": self._key.mint(claims),
        }


_STATUS_OF_ERROR = {
    INVALID_PARAMS: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    HEADER_MISMATCH: 400,
    MISSING_CAPABILITY: 400,
    METHOD_NOT_FOUND: 404,
}


def header_refusal(message: Mapping[str, Any], protocol_header: str | None) -> dict[str, Any] | None:
    """For the HTTP front: the -32020 error response when the ``MCP-Protocol-Version``
    header is absent or differs from the request's ``_meta`` version, -32022 when it
    names a version we do not speak and ``_meta`` none, else None."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, Mapping) else None
    if protocol_header is not None and version is None and protocol_header not in MODERN_PROTOCOL_VERSIONS:
        return to_wire(error_response(message.get("id"), unsupported_version(protocol_header)))
    if protocol_header is not None and (version is None or protocol_header == version):
        return None  # a missing _meta version is the server session's to refuse (-32602)
    why = (
        "the MCP-Protocol-Version header is missing"
        if protocol_header is None
        else f"the MCP-Protocol-Version header ({protocol_header}) differs from _meta's ({version})"
    )
    error = JsonRpcError(HEADER_MISMATCH, f"header mismatch: {why}; send the same version in both")
    return to_wire(error_response(message.get("id"), error))


def http_status(response: Mapping[str, Any] | None) -> int:
    """For the HTTP front: the status of a new-era response (the era's rules: 400 for
    bad ``_meta``, versions, headers, params and capabilities, 404 for an unknown
    method, else 200; 202 for no response)."""
    if response is None:
        return 202
    error = response.get("error")
    if not isinstance(error, Mapping):
        return 200
    return _STATUS_OF_ERROR.get(error.get("code"), 200)  # type: ignore[arg-type]
