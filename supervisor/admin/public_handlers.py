"""The admin API's public handlers beside the health check: what a client or a
person's browser reaches before it has any token. RFC 9728's protected-resource
metadata (so an MCP client finds the identity provider from our 401) and the
callback a person's browser lands on after signing in to a ``per_user`` server (its
one-time ``state`` is the authentication). ``AdminApi`` inherits them.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import TYPE_CHECKING, Any, Protocol

from quart import request
from quart_trio.wrappers import TrioResponse

from supervisor.runtime.sign_ins import SignInRefused
from supervisor.web.errors import ApiError
from supervisor.web.guard import Guard
from supervisor.web.resource_metadata import metadata_document

if TYPE_CHECKING:
    from supervisor.service import Supervisor


def page(status: int, title: str, text: str) -> TrioResponse:
    """A small HTML page, for a person's browser."""
    body = f"<!doctype html><title>{escape(title)}</title><p>{escape(text)}</p>"
    headers = {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"}
    return TrioResponse(body, status, headers)


class _Api(Protocol):
    """What these handlers use of ``AdminApi``."""

    guard: Guard
    supervisor: Supervisor

    def _json(
        self, data: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> TrioResponse: ...


class PublicHandlers:
    """The public routes' handlers (mixed into ``AdminApi``)."""

    async def protected_resource(self: _Api) -> TrioResponse:
        """RFC 9728's document, at each of its paths (``resource_metadata.py``)."""
        signin = self.guard.config.signin
        if signin is None:
            raise ApiError(
                404, "not_found", "no protected-resource metadata: sign-in is off (no signin section)"
            )
        return self._json(metadata_document(signin))

    protected_resource_mcp = protected_resource_v1 = protected_resource

    async def oauth_callback(self: _Api) -> TrioResponse:
        try:
            done = self.supervisor.people.sign_ins.finish(request.query_string.decode("latin-1"))
        except SignInRefused as exc:
            return page(400, "Sign-in not finished", str(exc))
        text = f"{done.person} is signed in to {done.server}. You can close this window and call again."
        return page(200, "Signed in", text)
