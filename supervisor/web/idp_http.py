"""Requests to the identity providers sign-in trusts: bounded, and untrusted.

Key sets, discovery documents and introspection answers come from a peer: an answer
past ``MAX_ANSWER_BYTES`` is not read further, redirects are not followed, and each
failure is an ``IdpUnavailable`` naming the issuer and what failed (connection
refused, a timeout, an HTTP status, a non-JSON answer), which a request that needed
the answer turns into a 503 (docs/identity.md, "When the identity provider is down").
"""

from __future__ import annotations

from typing import Any

import httpx2
import orjson

from actors.protocol.http_framing import USER_AGENT
from actors.redaction import safe_url

MAX_ANSWER_BYTES = 256 * 1024
TIMEOUT_S = 5.0


class IdpUnavailable(Exception):
    """An identity provider could not give what a check needs; the message says why."""


async def request_json(issuer: str, what: str, method: str, url: str, **kwargs: Any) -> Any:
    """The JSON answered to ``method url``; ``IdpUnavailable`` for anything else. A
    client per request: these are rare (a key set an hour, an introspection a minute
    per token), and so nothing outlives the request to be closed."""
    where = f"issuer {issuer}: {what} at {safe_url(url)}"
    client = httpx2.AsyncClient(follow_redirects=False, timeout=TIMEOUT_S, headers={"User-Agent": USER_AGENT})
    try:
        async with client, client.stream(method, url, **kwargs) as response:
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise IdpUnavailable(f"{where}: the answer is larger than {MAX_ANSWER_BYTES} bytes")
                chunks.append(chunk)
            status = response.status_code
    except httpx2.TimeoutException:
        raise IdpUnavailable(f"{where}: timed out after {TIMEOUT_S:g} s") from None
    except httpx2.ConnectError as exc:
        reason = "connection refused" if _refused(exc) else f"could not connect ({exc})"
        raise IdpUnavailable(f"{where}: {reason}") from None
    except httpx2.HTTPError as exc:
        raise IdpUnavailable(f"{where}: failed ({type(exc).__name__})") from None
    if status != 200:
        raise IdpUnavailable(f"{where}: answered HTTP {status}")
    try:
        return orjson.loads(b"".join(chunks))
    except orjson.JSONDecodeError:
        raise IdpUnavailable(f"{where}: the answer is not JSON") from None


def _refused(exc: BaseException | None) -> bool:
    """Whether a connect failure was a refusal (trio's connect puts it in a group, in
    the causes of httpx's error)."""
    while exc is not None:
        if isinstance(exc, ConnectionRefusedError):
            return True
        if isinstance(exc, BaseExceptionGroup) and any(_refused(inner) for inner in exc.exceptions):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
