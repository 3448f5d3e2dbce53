"""One served operation of ``serve`` (``Route``), and the names its rows use: media
types and the apps that serve them. The table of every route is ``routes.py``."""

from __future__ import annotations

import re

import attrs

from supervisor.web.roles import Action

JSON = "application/json"
SSE = "text/event-stream"
METRICS = "text/plain; version=0.0.4"
HTML = "text/html"

ADMIN, GATEWAY, BRIDGE = "admin", "gateway", "bridge"
"""The apps of ``serve`` (``Route.app``): the mount table gives ``/mcp`` to the
gateway's and ``/v1/bridge`` to the bridge's, the rest to the admin API."""


@attrs.frozen(slots=True)
class Route:
    """One served operation: method, OpenAPI path template, handler name, contract."""

    method: str
    path: str
    operation: str
    summary: str
    status: int = 200
    request: str | None = None  # schema name of the JSON body
    response: str | None = None  # schema name of the success body (JSON)
    media: str = JSON
    streams: bool = False  # also answers text/event-stream when asked to
    errors: tuple[tuple[str, str], ...] = ()  # (status, description) beyond the common ones
    query: tuple[str, ...] = ()  # optional string query parameters
    bodiless: tuple[tuple[str, str], ...] = ()  # (status, description): other successes, no body
    error_schema: str = "Error"  # the schema of its error bodies
    action: Action = attrs.field(kw_only=True)  # what the caller's role must allow
    websocket: bool = attrs.field(default=False, kw_only=True)  # a WebSocket, not an HTTP route
    app: str = attrs.field(default=ADMIN, kw_only=True)  # the app that serves it

    @property
    def public(self) -> bool:
        """Served without a bearer token."""
        return self.action is Action.PUBLIC

    @property
    def rule(self) -> str:
        """The werkzeug rule of ``path`` (``{sid}`` → ``<sid>``)."""
        return re.sub(r"\{(\w+)\}", r"<\1>", self.path)

    @property
    def parameters(self) -> tuple[str, ...]:
        """Path parameter names, in order."""
        return tuple(re.findall(r"\{(\w+)\}", self.path))
