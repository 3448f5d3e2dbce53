"""Ways to get a person's consent in the authorization-code flow.

- :class:`LoopbackAuthorizer` — ``mcp-supervisor auth login``: the authorization URL is
  shown to the user, and a listener on ``127.0.0.1`` (RFC 8252 §7.3) takes the browser's
  redirect. The ``state`` it carries is checked by the provider, so a stray or forged
  request to the port cannot plant a code.
- :class:`FollowRedirectAuthorizer` — for authorization servers that consent without a
  person (test servers, the conformance suite, pre-approved enterprise clients): it asks
  the authorization endpoint itself and reads the redirect it answers with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlsplit

import trio

from actors.redaction import safe_url

CALLBACK_PATH = "/callback"
MAX_REQUEST_HEAD = 16 * 1024
_PAGE = (
    b"<!doctype html><title>mcp-supervisor</title>"
    b"<p>Authorization received. You can close this window and return to the terminal.</p>"
)


class Authorizer(Protocol):
    """Gets a user's consent: opens (or prints) the authorization URL and returns the
    URL the browser was sent back to (with ``code`` and ``state``)."""

    @property
    def redirect_uri(self) -> str: ...

    async def authorize(self, server: str, url: str) -> str: ...


class CallbackError(Exception):
    """The browser never came back, or came back with something unusable."""


class LoopbackAuthorizer:
    """Shows the URL (``show``), then waits for one ``GET /callback?...`` on ``listener``."""

    def __init__(
        self, listener: trio.SocketListener, show: Callable[[str], None], *, timeout_s: float = 300.0
    ) -> None:
        self._listener = listener
        self._show = show
        self._timeout_s = timeout_s
        host, port = listener.socket.getsockname()[:2]
        self._redirect = f"http://{host}:{port}{CALLBACK_PATH}"

    @property
    def redirect_uri(self) -> str:
        return self._redirect

    async def authorize(self, server: str, url: str) -> str:
        self._show(url)
        with trio.move_on_after(self._timeout_s):
            while True:
                stream = await self._listener.accept()
                async with stream:
                    target = await _read_target(stream)
                    if target is None or urlsplit(target).path != CALLBACK_PATH:
                        await _answer(stream, 404, b"not found")
                        continue
                    await _answer(stream, 200, _PAGE, "text/html; charset=utf-8")
                    return f"{self._redirect.removesuffix(CALLBACK_PATH)}{target}"
        raise CallbackError(
            f"no authorization came back for mcp server {server} within {self._timeout_s:g} s"
        )


async def _read_target(stream: trio.SocketStream) -> str | None:
    """The request target of a ``GET``, or None for anything else."""
    head = b""
    with trio.move_on_after(10):
        while b"\r\n\r\n" not in head and len(head) < MAX_REQUEST_HEAD:
            chunk = await stream.receive_some(4096)
            if not chunk:
                break
            head += chunk
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != "GET" or not parts[1].startswith("/"):
        return None
    return parts[1]


async def _answer(stream: trio.SocketStream, status: int, body: bytes, kind: str = "text/plain") -> None:
    reason = {200: "OK", 404: "Not Found"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
        "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(trio.BrokenResourceError):
        await stream.send_all(head.encode() + body)


class FollowRedirectAuthorizer:
    """Consent without a person: GET the authorization URL, return where it redirects."""

    def __init__(self, redirect_uri: str = "http://127.0.0.1:1/callback", *, timeout_s: float = 30.0) -> None:
        self._redirect = redirect_uri
        self._timeout_s = timeout_s

    @property
    def redirect_uri(self) -> str:
        return self._redirect

    async def authorize(self, server: str, url: str) -> str:
        import httpx2  # here: `import supervisor` stays free of the HTTP client (issue 37)

        async with httpx2.AsyncClient(follow_redirects=False, timeout=self._timeout_s) as http:
            try:
                response = await http.get(url)
            except httpx2.HTTPError as exc:
                raise CallbackError(f"the authorization endpoint failed: {type(exc).__name__}") from None
        location = response.headers.get("location")
        if response.status_code not in (301, 302, 303, 307, 308) or not location:
            raise CallbackError(
                f"the authorization endpoint {safe_url(url)} answered HTTP {response.status_code} "
                "without redirecting back (it needs a person: use `mcp-supervisor auth login`)"
            )
        return location
