"""What a handler knows of the request it serves: the principal the guard put on
``g`` (its role already checked against the route's action) and the JSON body.
Shared by every handler module (``handlers.py``, ``surface_handlers.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quart import g, request

from supervisor.admin import bodies
from supervisor.settings.net import is_loopback_host
from supervisor.web.roles import Principal


def principal() -> Principal:
    """Who the request speaks for."""
    who: Principal | None = g.principal
    assert who is not None, "a non-public route without a principal"  # the guard ensures it
    return who


def tenant() -> str:
    """The caller's own tenant."""
    return principal().tenant


def scope() -> str | None:
    """Whose objects the caller sees: its own tenant's, or (operator) None, every tenant's."""
    return principal().scope


async def raw_body() -> bytes:
    """The request body as sent."""
    data = await request.get_data()
    return data if isinstance(data, bytes) else data.encode()


async def body(*, optional: bool = False) -> dict[str, Any]:
    """The request body as a JSON object (400 naming the problem otherwise)."""
    return bodies.parse_object(await raw_body(), optional=optional)


def client_is_loopback(scope: Mapping[str, Any]) -> bool:
    """Whether the peer's address is loopback (an ASGI scope may not say: then not)."""
    client = scope.get("client")
    return isinstance(client, list | tuple) and bool(client) and is_loopback_host(str(client[0]))


def request_target(scope: Mapping[str, Any]) -> str:
    """The request target as the client sent it, without the query: Hypercorn puts it
    in ``raw_path`` as is (``http://host/path`` for the absolute form), while ``path``
    is what Quart routes on, the authority already dropped."""
    raw = scope.get("raw_path")
    if isinstance(raw, bytes):
        return raw.decode("latin-1")
    return str(scope.get("path", "/"))
