"""The admin API as a Quart-Trio app: routes from ``openapi.ROUTES``, handlers in
``handlers.AdminApi``, and the gates every request passes first.

Order of a request: the ``before_request`` guard (Host and request target, Origin,
bearer token → principal, see ``auth.py``; then the role check of the route's action,
see ``roles.py``: 403 naming the roles that may) → routing (an unknown route is a
JSON 404, after the guard so that routes are not probed anonymously) → the handler →
JSON with the config's secret values scrubbed. A served route that is not in the
route table has no action and is refused to every role (``ROUTE_ACTIONS``).
Every error is JSON: ``ApiError`` from handlers, werkzeug's HTTP errors (404, 405,
413 for a body over ``MAX_BODY_BYTES``, 408 for a body that never arrives) and, as a
last resort, 500 with a generic message (the traceback goes to the log, which is
redacted).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from quart import g, has_request_context, has_websocket_context, request, websocket
from quart_trio import QuartTrio
from quart_trio.wrappers import TrioRequest, TrioResponse
from werkzeug.exceptions import HTTPException, MethodNotAllowed
from werkzeug.routing.exceptions import WebsocketMismatch

from actors.log_events import get_logger
from actors.redaction import Redactor
from supervisor.admin.bodies import MAX_BODY_BYTES
from supervisor.admin.handlers import AdminApi, json_response
from supervisor.admin.hosted import HostedSessions
from supervisor.admin.sse import EventFeeds
from supervisor.bridge.hub import BridgeHub
from supervisor.gateway.eras import NewEraHandler
from supervisor.gateway.http_front import MCP_PATH, refusal_response
from supervisor.gateway.http_rules import HttpRefusal
from supervisor.gateway.http_sessions import GatewaySessions
from supervisor.web.errors import INTERNAL_ERROR, ApiError, code_of, log_internal_error
from supervisor.web.guard import Guard
from supervisor.web.routes import ROUTES
from supervisor.web.scrubber import SecretScrubber

if TYPE_CHECKING:
    from supervisor.service import Supervisor

log = get_logger("supervisor.admin")

EXTENSION = "mcp_supervisor_admin"
BODY_TIMEOUT_S = 30

MCP_REFUSAL = -32600
"""The JSON-RPC error code of an HTTP refusal on ``/mcp`` (its ``data.code`` is the
admin API's error code: ``unauthorized``, ``forbidden``…)."""


class _Request(TrioRequest):
    """A request whose body bound is the admin API's, except on ``/mcp``, where the
    gateway reads the body itself against ``gateway.max_message_bytes`` (a message
    over it gets a JSON-RPC error of its own, and the session lives on)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) > 2 and args[2] == MCP_PATH:
            kwargs["max_content_length"] = None
        super().__init__(*args, **kwargs)


def create_app(
    supervisor: Supervisor,
    hosted: HostedSessions,
    *,
    bind_is_loopback: bool,
    gateway: GatewaySessions | None = None,
    new_era: NewEraHandler | None = None,
    bridge: BridgeHub | None = None,
) -> QuartTrio:
    """The admin app for ``supervisor``; HTTP sessions live in ``hosted``, MCP
    sessions of ``/mcp`` in ``gateway`` (None: one that ``/mcp`` finds not running);
    per-request-era MCP messages go to ``new_era`` (None: refused, saying so)."""
    app = QuartTrio("mcp_supervisor_admin", static_folder=None)
    app.request_class = _Request
    app.config.update(
        MAX_CONTENT_LENGTH=MAX_BODY_BYTES,
        BODY_TIMEOUT=BODY_TIMEOUT_S,
        PROVIDE_AUTOMATIC_OPTIONS=False,
    )
    # "/v1//servers" is a 404 here, not a redirect to somewhere else.
    app.url_map.merge_slashes = False
    config = supervisor.config
    scrubber = SecretScrubber(config.secrets)
    feeds = EventFeeds(supervisor.events)
    api = AdminApi(
        supervisor,
        hosted,
        feeds,
        Guard(lambda: supervisor.config, bind_is_loopback=bind_is_loopback, scrubber=scrubber),
        Redactor(config.secrets),
    )
    api.gateway = gateway if gateway is not None else GatewaySessions(supervisor)
    api.gateway.scrub = scrubber.scrub
    api.new_era = new_era
    api.bridge_hub = bridge if bridge is not None else BridgeHub(supervisor)
    app.extensions[EXTENSION] = api

    for route in ROUTES:
        app.add_url_rule(
            route.rule,
            route.operation,
            view_func=getattr(api, route.operation),
            methods=[route.method],
            provide_automatic_options=False,
            websocket=route.websocket,
        )

    @app.before_request
    async def guard_request() -> TrioResponse | None:
        verdict = api.guard.verdict(request.headers, request.scope, request.endpoint)
        if isinstance(verdict, ApiError):
            return _refusal(verdict)
        g.principal = verdict
        return None

    def _refusal(error: ApiError) -> TrioResponse:
        """An error answer: a JSON-RPC error object on ``/mcp`` (its client speaks
        JSON-RPC), the admin API's error body elsewhere."""
        if _path() == MCP_PATH:
            return mcp_refusal(error, scrubber)
        return json_response(error.body(), scrubber, error.status, error.headers)

    @app.errorhandler(ApiError)
    async def api_error(error: ApiError) -> TrioResponse:
        return _refusal(error)

    @app.errorhandler(HTTPException)
    async def http_error(error: HTTPException) -> TrioResponse:
        status = error.code or 500
        headers: dict[str, str] = {}
        if isinstance(error, MethodNotAllowed) and error.valid_methods:
            headers["Allow"] = ", ".join(sorted(set(error.valid_methods) - {"HEAD", "OPTIONS"}))
        code = code_of(status)
        message = error.description or error.name
        if isinstance(error, WebsocketMismatch):  # a plain GET of /v1/bridge
            status, code, message = (
                426,
                "upgrade_required",
                "this endpoint is a WebSocket; connect with ws://",
            )
            headers["Upgrade"] = "websocket"
        return _refusal(ApiError(status, code, message, headers))

    @app.errorhandler(Exception)
    async def unexpected(error: Exception) -> TrioResponse:
        return internal_error(_path(), scrubber)

    return app


def _path() -> str:
    """The path being answered: a request's, or a WebSocket upgrade's (one to a path
    without a socket route ends in the same error handlers, outside a request context)."""
    if has_request_context():
        return request.path
    return websocket.path if has_websocket_context() else ""


def mcp_refusal(error: ApiError, scrubber: SecretScrubber) -> TrioResponse:
    """A refusal on ``/mcp``: a JSON-RPC error object (its ``data.code`` the admin
    API's error code), with the error's headers (``WWW-Authenticate``)."""
    refusal = HttpRefusal(
        error.status, error.message, code=MCP_REFUSAL, data={"code": error.code, **error.extra}
    )
    response = refusal_response(refusal, scrubber.scrub)
    response.headers.update(error.headers)
    return response


def internal_error(path: str, scrubber: SecretScrubber) -> TrioResponse:
    """The last-resort 500: a generic message; the traceback goes to the (redacted) log."""
    log_internal_error(path)
    return json_response(INTERNAL_ERROR, scrubber, 500)


def admin_api(app: QuartTrio) -> AdminApi:
    """The handlers object of an app made by ``create_app`` (for the server's shutdown)."""
    api: Any = app.extensions[EXTENSION]
    assert isinstance(api, AdminApi)
    return api


def routes_served(app: QuartTrio) -> Mapping[tuple[str, str], str]:
    """(method, werkzeug rule) → endpoint of every served route (HEAD/OPTIONS aside)."""
    served: dict[tuple[str, str], str] = {}
    for rule in app.url_map.iter_rules():
        for method in rule.methods or ():
            if method not in ("HEAD", "OPTIONS"):
                served[(method, rule.rule)] = rule.endpoint
    return served
