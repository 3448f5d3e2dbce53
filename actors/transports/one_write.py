"""A request in one write: the HTTP client's head and body sent in one ``send``.

httpcore writes a request as its head, then its body, then an empty write for the end of
the message (h11's end of a ``Content-Length`` body): two segments on the wire, two
wake-ups of the server and two system calls per request (``benchmarks/RESULTS.md``,
"Issue 37: the new era over Streamable HTTP", counts them). So the connections of a
remote transport's client hold what is written until the message ends (the empty write)
or a read begins, whichever comes first, and send it at once. Nothing is held across a
read: a response is never waited for before its request left, whatever the body's
framing (chunked too).

The bytes are those httpcore made; only their grouping into ``send`` calls changes.
"""

# httpcore's stream and backend interface takes its timeouts as arguments:
# ruff: noqa: ASYNC109

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2
import trio
from httpcore2 import AsyncNetworkBackend, AsyncNetworkStream
from httpcore2._backends.trio import TrioStream


class OneWriteStream(AsyncNetworkStream):
    """A connection whose writes are sent together at the end of a message.

    Over httpcore's Trio stream, reads and writes go to the Trio stream under it: the
    same errors (httpcore's ``ReadError``, ``WriteTimeout``…) without the generator
    context manager and the cancel scope httpcore wraps around each one, which were a
    tenth of a call's CPU. A timeout of None needs no scope at all."""

    def __init__(self, stream: AsyncNetworkStream) -> None:
        self._stream = stream
        self._held: list[bytes] = []
        raw = getattr(stream, "_stream", None) if isinstance(stream, TrioStream) else None
        self._raw: trio.abc.Stream | None = raw if isinstance(raw, trio.abc.Stream) else None

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._held.append(buffer)
        else:
            await self._flush(timeout)

    async def _flush(self, timeout: float | None) -> None:
        held = self._held
        if held:
            self._held = []
            data = held[0] if len(held) == 1 else b"".join(held)
            raw = self._raw
            if raw is None:
                await self._stream.write(data, timeout=timeout)
                return
            try:
                if timeout is None:
                    await raw.send_all(data)
                    return
                with trio.move_on_after(timeout):
                    await raw.send_all(data)
                    return
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise httpcore2.WriteError(exc) from exc
            raise httpcore2.WriteTimeout(trio.TooSlowError())

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        await self._flush(timeout)
        raw = self._raw
        if raw is None:
            return await self._stream.read(max_bytes, timeout=timeout)
        try:
            if timeout is None:
                return bytes(await raw.receive_some(max_bytes))
            with trio.move_on_after(timeout):
                return bytes(await raw.receive_some(max_bytes))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise httpcore2.ReadError(exc) from exc
        raise httpcore2.ReadTimeout(trio.TooSlowError())

    async def aclose(self) -> None:
        self._held = []
        await self._stream.aclose()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> AsyncNetworkStream:
        await self._flush(timeout)
        return OneWriteStream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class OneWriteBackend(AsyncNetworkBackend):
    """httpcore's own backend, each connection wrapped in a :class:`OneWriteStream`."""

    def __init__(self, backend: AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncNetworkStream:
        stream = await self._backend.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return OneWriteStream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> AsyncNetworkStream:
        stream = await self._backend.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)
        return OneWriteStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def send_requests_in_one_write(client: httpx2.AsyncClient) -> None:
    """Wrap the backend of ``client``'s own connection pool (a proxy's, from the
    environment, stays as it is). httpx takes no backend as an argument, and a client
    given a transport of ours would ignore the proxy variables, so the backend is set on
    the pool the client made; an httpx laid out otherwise keeps its own
    (``tests/actors/transports/test_one_write.py`` fails then)."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if isinstance(pool, httpcore2.AsyncConnectionPool) and isinstance(backend, AsyncNetworkBackend):
        pool._network_backend = OneWriteBackend(backend)
