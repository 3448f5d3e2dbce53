"""The guard: the first word on every request of every app of ``serve``.

It runs before routing or a handler: Host and request target, Origin, the bearer
token → principal (``auth.py``), then the role check of the operation the request is
for (``roles.py``: 403 naming the roles that may). Its verdict is the principal the
request speaks for (None: anonymous, on a public route) or the ``ApiError`` that
refuses it; each app words that refusal its own way (the admin API's error body, a
JSON-RPC error on ``/mcp``). No framework: the apps hand it the request's headers and
ASGI scope.

``Guard`` holds what a reload may change: the running config's tokens, re-read when
the config object changes (one identity check per request), its new secrets taught
to the scrubber every app shares.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from supervisor.settings.model import Config
from supervisor.settings.net import is_loopback_host
from supervisor.web.auth import Denial, TokenBook, check_request
from supervisor.web.errors import ApiError, forbidden
from supervisor.web.roles import Action, Principal, authorize
from supervisor.web.routes import ROUTES
from supervisor.web.scrubber import SecretScrubber

PUBLIC_OPERATIONS = frozenset(route.operation for route in ROUTES if route.public)
ROUTE_ACTIONS: Mapping[str, Action] = {route.operation: route.action for route in ROUTES}
"""Operation → the action it needs: the guard's one source of what a route requires.
A served route that is not in the route table has no action and is refused to every
role."""


class HeaderLookup(Protocol):
    """Request headers by name, every value (werkzeug's ``Headers`` is one)."""

    def getlist(self, key: str) -> list[str]: ...


def client_is_loopback(scope: Mapping[str, Any]) -> bool:
    """Whether the peer's address is loopback (an ASGI scope may not say: then not)."""
    client = scope.get("client")
    return isinstance(client, list | tuple) and bool(client) and is_loopback_host(str(client[0]))


def request_target(scope: Mapping[str, Any]) -> str:
    """The request target as the client sent it, without the query: Hypercorn puts it
    in ``raw_path`` as is (``http://host/path`` for the absolute form), while ``path``
    is what apps route on, the authority already dropped."""
    raw = scope.get("raw_path")
    if isinstance(raw, bytes):
        return raw.decode("latin-1")
    return str(scope.get("path", "/"))


def role_refusal(principal: Principal | None, operation: str) -> ApiError | None:
    """The 403 for a principal whose role may not call ``operation`` (anonymous callers
    reach only public routes, which the token gate already ensured)."""
    action = ROUTE_ACTIONS.get(operation)
    if principal is None:
        return None if action is Action.PUBLIC else ApiError(403, "forbidden", f"{operation} is not public")
    if authorize(principal, action):
        return None
    return forbidden(principal, action, operation)


class Guard:
    """The guard of one server's apps, over the running config (``config()``)."""

    def __init__(
        self, config: Callable[[], Config], *, bind_is_loopback: bool, scrubber: SecretScrubber
    ) -> None:
        self._config_of = config
        self.bind_is_loopback = bind_is_loopback
        self.scrubber = scrubber
        self._config = config()
        self._tokens = TokenBook(self._config.admin.tokens)

    @property
    def config(self) -> Config:
        """The config running now (the tokens of ``tokens()`` are its)."""
        self.tokens()
        return self._config

    def tokens(self) -> TokenBook:
        """The admin tokens of the config running now. When a reload (by any way in)
        changed it, its tokens replace the old ones and its secrets are masked from then
        on."""
        config = self._config_of()
        if config is not self._config:
            self._config = config
            self._tokens = TokenBook(config.admin.tokens)
            self.scrubber.learn(config.secrets)
        return self._tokens

    def verdict(
        self, headers: HeaderLookup, scope: Mapping[str, Any], operation: str | None
    ) -> Principal | ApiError | None:
        """Who one request speaks for (None: anonymous, on a public route), or the
        refusal. ``operation`` None: no route matched (routing then answers 404 or 405,
        so only the gates run)."""
        verdict = check_request(
            public=operation in PUBLIC_OPERATIONS,
            hosts=headers.getlist("Host"),
            origins=headers.getlist("Origin"),
            authorizations=headers.getlist("Authorization"),
            tokens=self.tokens(),
            bind_is_loopback=self.bind_is_loopback,
            target=request_target(scope),
            client_is_loopback=client_is_loopback(scope),
        )
        if isinstance(verdict, Denial):
            return ApiError(verdict.status, verdict.code, verdict.message, verdict.headers)
        if operation is not None:
            refused = role_refusal(verdict.principal, operation)
            if refused is not None:
                return refused
        return verdict.principal
