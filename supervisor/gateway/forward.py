"""Passing a ``/mcp`` request on to the replica run that holds its session.

The load balancer routes a session's requests by its id's prefix, to the replica that
minted it; after a takeover another replica holds it, and after the first one comes
back (a rolling restart) the balancer sends it there again. That replica passes each
such request on, as it came (method, body, the client's own headers: the holder's
guard checks the caller again, with the same ``Authorization`` and ``Host``), marked
``Mcp-Replica-Forwarded`` so the holder never passes it on again, and relays the
answer as it streams. Replicas reach each other at the address in their heartbeat row.

Each request passed on opens a connection of its own, as nginx does to the replicas
(``config/examples/nginx.conf``): a kept connection to a holder that is draining or
dying can fail after the request went out, which must be answered as possibly run
(``Lost``), while a refused new connection is safely ``Unreachable``.

A holder that cannot be reached (refused, reset before an answer: killed a moment ago,
its heartbeat not yet expired) raises ``Unreachable``; the caller waits for the
heartbeat to expire and takes the session over. Nothing was sent to a holder that did
not accept the connection, so nothing runs twice.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable
from typing import Any

from supervisor.cluster.session_ids import FORWARDED_HEADER
from supervisor.web.http import Response

CONNECT_TIMEOUT_S = 2.0
"""How long a replica may take to accept a forwarded request's connection."""
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        FORWARDED_HEADER.lower(),
    }
)


_SET_BY_OUR_SERVER = _HOP_BY_HOP | {"date", "server"}
"""What the relay does not copy from the holder's answer: ours adds its own."""


class Unreachable(Exception):
    """The holder did not take the request (nothing was sent to it)."""


class Lost(Exception):
    """The request reached the holder, which failed before it answered."""


def passed_on_headers(headers: Iterable[tuple[str, str]], mark: str) -> list[tuple[str, str]]:
    """The client's headers as the holder gets them: hop-by-hop ones dropped, ours added."""
    kept = [(name, value) for name, value in headers if name.lower() not in _HOP_BY_HOP]
    return [*kept, (FORWARDED_HEADER, mark)]


async def pass_on(
    method: str, address: str, path: str, headers: list[tuple[str, str]], body: bytes
) -> Response:
    """The holder's answer to the request, streamed back as it comes."""
    import httpx2

    client = httpx2.AsyncClient(
        timeout=httpx2.Timeout(None, connect=CONNECT_TIMEOUT_S), follow_redirects=False, trust_env=False
    )
    try:
        request = client.build_request(method, address + path, headers=headers, content=body)
        response = await client.send(request, stream=True)
    except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
        await client.aclose()
        raise Unreachable(str(exc) or type(exc).__name__) from None
    except httpx2.HTTPError as exc:  # sent, then lost: it may have run, so never again
        await client.aclose()
        raise Lost(str(exc) or type(exc).__name__) from None
    except BaseException:
        await client.aclose()
        raise
    relayed = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _SET_BY_OUR_SERVER]
    return Response(response.status_code, tuple(relayed), _relay(client, response), timeout=None)


async def _relay(client: Any, response: Any) -> AsyncGenerator[bytes, None]:
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    finally:
        await response.aclose()
        await client.aclose()
