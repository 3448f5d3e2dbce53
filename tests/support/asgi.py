"""One HTTP request to an ASGI app in process, no socket: what it sent back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import orjson
import trio


@attrs.frozen
class AsgiReply:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


async def asgi_request(
    app: Any,
    method: str,
    path: str,
    *,
    headers: Mapping[str, str] | None = None,
    json: Any = None,
    body: bytes = b"",
) -> AsgiReply:
    """``method path`` from a loopback client, its whole body at once; the app's answer
    (a stream read to its end)."""
    if json is not None:
        body = orjson.dumps(json)
    raw = [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *raw],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
    }
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    assert start["type"] == "http.response.start", sent
    reply_headers = {name.decode(): value.decode() for name, value in start["headers"]}
    return AsgiReply(start["status"], reply_headers, b"".join(m.get("body", b"") for m in sent[1:]))
