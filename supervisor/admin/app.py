"""The admin API as a Quart-Trio app: its rows of the route table
(``web/routes.py``), handlers in ``handlers.AdminApi``, and the gates every request
passes first.

Order of a request: the ``before_request`` guard (``web/guard.py``: Host and request
target, Origin, bearer token → principal; then the role check of the route's action:
403 naming the roles that may) → routing (an unknown route is a JSON 404, after the
guard so that routes are not probed anonymously) → the handler → JSON with the
config's secret values scrubbed. A served route that is not in the route table has no
action and is refused to every role. Every error is JSON: ``ApiError`` from handlers,
werkzeug's HTTP errors (404, 405, 413 for a body over ``MAX_BODY_BYTES``, 408 for a
body that never arrives) and, as a last resort, 500 with a generic message (the
traceback goes to the log, which is redacted).

``/mcp`` and ``/v1/bridge`` are not this app's: the mount table of ``server/`` gives
them to the gateway's and the bridge's apps. What they hold, this app lists through
``web/listings.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from quart import g, has_request_context, has_websocket_context, request, websocket
from quart_trio import QuartTrio
from quart_trio.wrappers import TrioResponse
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from actors.redaction import Redactor
from supervisor.admin.bodies import MAX_BODY_BYTES
from supervisor.admin.handlers import AdminApi, json_response
from supervisor.admin.hosted import HostedSessions
from supervisor.admin.sse import EventFeeds
from supervisor.web.errors import INTERNAL_ERROR, ApiError, code_of, log_internal_error
from supervisor.web.exchange import BODY_TIMEOUT_S, RESPONSE_TIMEOUT_S
from supervisor.web.guard import Guard
from supervisor.web.listings import NOTHING, BridgeListing, SessionListing
from supervisor.web.routes import ADMIN, ROUTES
from supervisor.web.scrubber import SecretScrubber

if TYPE_CHECKING:
    from supervisor.service import Supervisor

EXTENSION = "mcp_supervisor_admin"


def create_app(
    supervisor: Supervisor,
    hosted: HostedSessions,
    *,
    bind_is_loopback: bool = True,
    guard: Guard | None = None,
    gateway: SessionListing = NOTHING,
    bridge: BridgeListing = NOTHING,
) -> QuartTrio:
    """The admin app for ``supervisor``; HTTP sessions live in ``hosted``. ``guard``:
    the server's, shared with the apps beside this one (None: one of its own, for a
    server bound to a loopback address or not, ``bind_is_loopback``); ``gateway`` and
    ``bridge``: what it lists of them."""
    app = QuartTrio("mcp_supervisor_admin", static_folder=None)
    app.config.update(
        MAX_CONTENT_LENGTH=MAX_BODY_BYTES,
        BODY_TIMEOUT=BODY_TIMEOUT_S,
        RESPONSE_TIMEOUT=RESPONSE_TIMEOUT_S,
        PROVIDE_AUTOMATIC_OPTIONS=False,
    )
    # "/v1//servers" is a 404 here, not a redirect to somewhere else.
    app.url_map.merge_slashes = False
    if guard is None:
        scrubber = SecretScrubber(supervisor.config.secrets)
        guard = Guard(lambda: supervisor.config, bind_is_loopback=bind_is_loopback, scrubber=scrubber)
    scrubber = guard.scrubber
    feeds = EventFeeds(supervisor.events)
    redactor = Redactor(supervisor.config.secrets)
    api = AdminApi(supervisor, hosted, feeds, guard, redactor, gateway=gateway, bridge=bridge)
    app.extensions[EXTENSION] = api

    for route in ROUTES:
        if route.app == ADMIN:
            app.add_url_rule(
                route.rule,
                route.operation,
                view_func=getattr(api, route.operation),
                methods=[route.method],
                provide_automatic_options=False,
            )

    @app.before_request
    async def guard_request() -> TrioResponse | None:
        api.notice_reload()
        verdict = await api.guard.verdict(request.headers, request.scope, request.endpoint)
        if isinstance(verdict, ApiError):
            return _refusal(verdict)
        g.principal = verdict
        return None

    def _refusal(error: ApiError) -> TrioResponse:
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
        return _refusal(ApiError(status, code_of(status), error.description or error.name, headers))

    @app.errorhandler(Exception)
    async def unexpected(error: Exception) -> TrioResponse:
        log_internal_error(_path())
        return json_response(INTERNAL_ERROR, scrubber, 500)

    return app


def _path() -> str:
    """The path being answered: a request's, or a WebSocket upgrade's (one to a path
    without a socket route ends in the same error handlers, outside a request context)."""
    if has_request_context():
        return request.path
    return websocket.path if has_websocket_context() else ""


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
