"""What a handler knows of the request it serves: the principal the guard put on
``g`` (its role already checked against the route's action) and the JSON body.
Shared by every handler module (``handlers.py``, ``surface_handlers.py``)."""

from __future__ import annotations

from typing import Any

from quart import g, request

from supervisor.admin import bodies
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
