"""The guard: the first word on every request of every app of ``serve``.

It runs before routing or a handler: Host and request target, Origin, the bearer
token → principal (``auth.py``), then the role check of the operation the request is
for (``roles.py``: 403 naming the roles that may). Its verdict is the principal the
request speaks for (None: anonymous, on a public route) or the ``ApiError`` that
refuses it; each app words that refusal its own way (the admin API's error body, a
JSON-RPC error on ``/mcp``). No framework: the apps hand it the request's headers and
ASGI scope.

``Guard`` holds what a reload may change: the running config's tokens and its sign-in
(``signin.py``, kept with its key sets while the ``signin`` section stays the same),
re-read when the config object changes (one identity check per request), its new
secrets taught to the scrubber every app shares.

A static token is checked first, in constant time, and the verdict of a static-token
request never awaits anything that suspends. A bearer token that is no static one,
with sign-in on, is checked by sign-in (its I/O, when a key set must be fetched, is
why ``verdict`` is async): a refusal is a 401 naming why, with ``WWW-Authenticate``
pointing at the protected-resource metadata; an identity provider that cannot answer,
with no key set kept, is a 503 with ``Retry-After``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from supervisor.settings.model import Config
from supervisor.settings.net import is_loopback_host
from supervisor.web.auth import Admitted, Denial, Presented, TokenBook, check_request
from supervisor.web.errors import ApiError, forbidden
from supervisor.web.idp_http import IdpUnavailable
from supervisor.web.resource_metadata import challenge
from supervisor.web.roles import Action, Principal, authorize
from supervisor.web.routes import ROUTES
from supervisor.web.scrubber import SecretScrubber
from supervisor.web.signin import SignIn
from supervisor.web.token_claims import SigninRefused

PUBLIC_OPERATIONS = frozenset(route.operation for route in ROUTES if route.public)
IDP_RETRY_AFTER_S = 30
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
        self._signin = None if self._config.signin is None else SignIn(self._config.signin)
        self.seen: Callable[[str, str], None] | None = None
        """Told (person, access token) of every signed-in request: what token exchange
        sends upstream for that person (``server/apps.py`` wires it)."""

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
            if config.signin != (None if self._signin is None else self._signin.settings):
                self._signin = None if config.signin is None else SignIn(config.signin)
        return self._tokens

    @property
    def signin(self) -> SignIn | None:
        """The running config's sign-in (None: off)."""
        self.tokens()
        return self._signin

    async def signed_in(self, token: str, operation: str | None) -> Principal | ApiError:
        """Who a presented token (no static one) signs in, or its 401 or 503."""
        signin = self.signin
        assert signin is not None  # only Presented with sign-in on
        try:
            principal = await signin.principal_of(token)
        except SigninRefused as refused:
            reason = str(refused)
            header = challenge(signin.settings, operation, reason)
            return ApiError(401, "unauthorized", reason, {"WWW-Authenticate": header})
        except IdpUnavailable as down:
            message = f"sign-in cannot check the token now: {down}; try again later"
            return ApiError(503, "unavailable", message, {"Retry-After": str(IDP_RETRY_AFTER_S)})
        if self.seen is not None and principal.person is not None:
            self.seen(principal.person, token)
        return principal

    async def verdict(
        self, headers: HeaderLookup, scope: Mapping[str, Any], operation: str | None
    ) -> Principal | ApiError | None:
        """Who one request speaks for (None: anonymous, on a public route), or the
        refusal. ``operation`` None: no route matched (routing then answers 404 or 405,
        so only the gates run)."""
        signin = self.signin
        verdict = check_request(
            public=operation in PUBLIC_OPERATIONS,
            hosts=headers.getlist("Host"),
            origins=headers.getlist("Origin"),
            authorizations=headers.getlist("Authorization"),
            tokens=self.tokens(),
            bind_is_loopback=self.bind_is_loopback,
            target=request_target(scope),
            client_is_loopback=client_is_loopback(scope),
            signin=signin is not None,
        )
        if isinstance(verdict, Presented):
            principal = await self.signed_in(verdict.token, operation)
            if isinstance(principal, ApiError):
                return principal
            verdict = Admitted(principal)
        if isinstance(verdict, Denial):
            return self.denial(verdict, operation)
        if operation is not None:
            refused = role_refusal(verdict.principal, operation)
            if refused is not None:
                return refused
        return verdict.principal

    def denial(self, denial: Denial, operation: str | None) -> ApiError:
        """A gate's refusal; with sign-in on, a 401 points at the resource metadata."""
        headers = denial.headers
        signin = self._signin
        if denial.status == 401 and signin is not None:
            reason = None if headers.get("WWW-Authenticate") == "Bearer" else denial.message
            headers = {**headers, "WWW-Authenticate": challenge(signin.settings, operation, reason)}
        return ApiError(denial.status, denial.code, denial.message, headers)
