"""Hypercorn's own refusals, as JSON like every other answer of the admin API.

A request h11 cannot parse (a NUL in a header such as ``Authorization: Bearer a\\0b``,
a bare CR, a malformed request line, headers over the size limit) never reaches the
app: Hypercorn answers it itself, with a bodiless 400, 431 or 501. Hypercorn has no
setting for that answer's body, so ``install`` wraps the one method that writes it,
``H11Protocol._send_error_response``, once per process. The wrapper changes nothing
for a server whose config is not an ``AdminHypercornConfig``: an embedding host that
runs its own Hypercorn in the same process keeps Hypercorn's behaviour.

Why a wrapper and not a proxy in front: the alternative is parsing HTTP twice. If a
Hypercorn release renames the method, ``install`` does nothing and the test that
sends a NUL (tests/server/test_admin_targets.py) fails, which is the signal to revisit this.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import h11
import orjson
from hypercorn.config import Config as HypercornConfig
from hypercorn.protocol.h11 import H11Protocol

from supervisor.web.routes import JSON

_MARK = "_mcp_supervisor_json_refusals"
_REFUSALS = {
    400: (
        "bad_request",
        "the request is not valid HTTP/1.1: a malformed request line, or a header holding a "
        "character HTTP does not allow (such as NUL, or CR outside a line end)",
    ),
    431: ("too_large", "the request line and headers are too large"),
    501: ("not_implemented", "the request's transfer coding is not supported; send a Content-Length"),
}


class AdminHypercornConfig(HypercornConfig):
    """Hypercorn settings of the admin API: marks the servers whose refusals are JSON."""


def refusal_body(status: int) -> bytes:
    """The JSON error body of a refusal Hypercorn makes before the app runs."""
    code, message = _REFUSALS.get(status, ("bad_request", "the request is not valid HTTP/1.1"))
    return orjson.dumps({"error": {"code": code, "message": message}})


def install() -> None:
    """Make Hypercorn's protocol-level refusals JSON for admin servers (idempotent)."""
    original: Callable[[Any, int], Awaitable[None]] | None = getattr(
        H11Protocol, "_send_error_response", None
    )
    if original is None or getattr(original, _MARK, False):
        return

    async def send_error_response(self: Any, status_code: int) -> None:
        if not isinstance(self.config, AdminHypercornConfig):
            await original(self, status_code)
            return
        body = refusal_body(status_code)
        headers = [
            (b"content-type", JSON.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *self.config.response_headers("h11"),
        ]
        await self._send_h11_event(h11.Response(status_code=status_code, headers=headers))
        await self._send_h11_event(h11.Data(data=body))
        await self._send_h11_event(h11.EndOfMessage())

    setattr(send_error_response, _MARK, True)
    setattr(H11Protocol, "_send_error_response", send_error_response)  # noqa: B010
