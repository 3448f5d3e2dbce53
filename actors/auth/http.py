"""Requests to authorization servers and identity providers: bounded, and untrusted.

An authorization server is as untrusted as any other peer: an answer past
``MAX_METADATA_BYTES`` is not read further, redirects are not followed, a 5xx or a
failed connection is a :class:`~actors.transport_errors.TransportClosed` (the
connection retries later), and a refusal names at most the server's ``error`` code.
The requests go through httpx2, the client the transports already use (authlib's own
async client is tied to httpx). A server with a ``tls`` block (mutual TLS) reaches its
OAuth endpoints with the same client certificate and trusted CA as its MCP endpoint:
:func:`tls_transport` is the transport its provider is given.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx2
import orjson

from actors.auth.dpop import NONCE_ERROR, DPoPSigner
from actors.auth.errors import auth_failed
from actors.protocol.http_framing import USER_AGENT
from actors.redaction import safe_url
from actors.tls import ClientTls, server_context, tls_refusal
from actors.transport_errors import TransportClosed

MAX_METADATA_BYTES = 256 * 1024  # any answer of an authorization server (metadata, tokens)
_ERROR_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}\Z")


def tls_transport(server: str, tls: ClientTls | None) -> httpx2.AsyncBaseTransport | None:
    """The transport for a server's OAuth requests when it has a ``tls`` block (None:
    httpx's default). One per provider: each flow's client closes its pooled
    connections on leaving, and the next opens new ones on the same transport."""
    context = server_context(server, tls)
    return None if context is None else httpx2.AsyncHTTPTransport(verify=context)


class AuthServerHttp:
    """The HTTP side of one server's OAuth client: ``server`` names it in every error."""

    def __init__(self, server: str, *, timeout_s: float, transport: httpx2.AsyncBaseTransport | None) -> None:
        self.server = server
        self._timeout_s = timeout_s
        self._transport = transport

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            follow_redirects=False,
            timeout=self._timeout_s,
            headers={"User-Agent": USER_AGENT},
            transport=self._transport,
        )

    async def get_json(self, http: httpx2.AsyncClient, url: str, what: str) -> Any | None:
        """A metadata document, or None when it is not there (any 4xx, too big, not JSON)."""
        status, content = await self.fetch(http, "GET", url, what, headers={"Accept": "application/json"})
        if status >= 500:
            where = safe_url(url)
            raise TransportClosed(f"mcp server {self.server}: {what} at {where} answered HTTP {status}")
        if status != 200 or content is None:
            return None
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError:
            return None

    async def post(
        self,
        http: httpx2.AsyncClient,
        url: str,
        what: str,
        *,
        proof: DPoPSigner | None = None,
        form: Callable[[], dict[str, str]] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The JSON object answered. With ``proof`` (DPoP), the request carries a fresh
        proof, and a ``use_dpop_nonce`` refusal with a new nonce is retried once with it
        (RFC 9449 §8). ``form`` builds the body for each attempt, so a retry carries a
        fresh client assertion (its ``jti`` must not be replayed, RFC 7523 §3)."""
        for retry in (False, True):
            seen: dict[str, str] = {}
            if form is not None:
                kwargs["data"] = form()
            if proof is not None:
                kwargs["headers"] = {**kwargs.get("headers", {}), **proof.headers("POST", url)}
            status, content = await self.fetch(http, "POST", url, what, seen=seen, **kwargs)
            try:
                body = None if content is None else orjson.loads(content) if content else {}
            except orjson.JSONDecodeError:
                body = None
            nonce = seen.get("dpop-nonce")
            if proof is None or not proof.note_nonce(url, nonce) or retry or status != 400:
                break
            if not isinstance(body, dict) or body.get("error") != NONCE_ERROR:
                break
        if status >= 500:
            raise TransportClosed(f"mcp server {self.server}: {what} answered HTTP {status}")
        if not 200 <= status < 300 or not isinstance(body, dict):
            code = body.get("error") if isinstance(body, dict) else None
            reason = code if isinstance(code, str) and _ERROR_CODE.match(code) else "no usable answer"
            raise auth_failed(self.server, f"{what} was refused: HTTP {status} ({reason})")
        return body

    async def fetch(
        self,
        http: httpx2.AsyncClient,
        method: str,
        url: str,
        what: str,
        *,
        seen: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> tuple[int, bytes | None]:
        """Status and body; the body is None past ``MAX_METADATA_BYTES``, and is not read
        further: an authorization server is as untrusted as any other peer. ``seen``
        gets the answer's ``DPoP-Nonce`` header, if any."""
        try:
            async with http.stream(method, url, **kwargs) as response:
                if seen is not None and "dpop-nonce" in response.headers:
                    seen["dpop-nonce"] = response.headers["dpop-nonce"]
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_METADATA_BYTES:
                        return response.status_code, None
                    chunks.append(chunk)
                return response.status_code, b"".join(chunks)
        except httpx2.HTTPError as exc:
            refusal = tls_refusal(exc)
            if refusal is not None and refusal.ours:
                raise refusal.refused_ours(self.server, what) from None
            reason = refusal.text if refusal is not None else type(exc).__name__
            raise TransportClosed(f"mcp server {self.server}: {what} failed: {reason}") from None
