"""The admin API, called in process with a console session's token.

The request is made as the browser's would be, minus the cookie: the same ``Host``,
the session's token as ``Authorization: Bearer``, no ``Origin`` (the console checked it
already). The API's guard, roles and tenants then decide, as for any client. A request
answered whole returns its status and body (``call``); an event stream is relayed as
it comes, the browser's own ``receive`` and ``send`` passed through (``relayed_scope``),
so its hang-up ends the API's stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

import attrs
import trio
from hypercorn.typing import ASGIFramework

Asgi = ASGIFramework


@attrs.frozen
class ApiAnswer:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def _scope(
    method: str, path: str, host: str, token: str | None, client: Any, query: str = ""
) -> dict[str, Any]:
    headers = [(b"host", host.encode("latin-1")), (b"accept", b"application/json")]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode("latin-1")))
    if method != "GET":
        headers.append((b"content-type", b"application/json"))
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": query.encode(),
        "root_path": "", "headers": headers, "client": client, "server": None, "extensions": {},
    }  # fmt: skip


async def call(
    app: Asgi, method: str, path: str, *, host: str, token: str | None, client: Any = None,
    body: Any = None, query: str = "",
) -> ApiAnswer:  # fmt: skip
    """One API request, answered whole."""
    chunks: list[bytes] = []
    status = 500
    sent = False
    data = b"" if body is None else json.dumps(body).encode()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": data, "more_body": False}
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: Mapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))

    await app(cast(Any, _scope(method, path, host, token, client, query)), cast(Any, receive), send)
    return ApiAnswer(status, b"".join(chunks))


def relayed_scope(scope: Mapping[str, Any], path: str, token: str | None) -> dict[str, Any]:
    """The browser's request as the API gets it when the console relays it whole (an
    event stream): another path, the session's token, no cookie, no Origin."""
    headers = [
        (k, v) for k, v in scope["headers"] if k.lower() not in (b"cookie", b"origin", b"authorization")
    ]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode("latin-1")))
    return {**scope, "path": path, "raw_path": path.encode(), "query_string": b"", "headers": headers}
