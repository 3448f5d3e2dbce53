"""The supervisor's connector: it opens the transport a server's configured type names."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from actors.redaction import Redactor
from actors.spec import ServerSpec
from actors.transport_errors import SpawnError
from actors.transports.base import Transport
from actors.transports.raw_stdio import RawStdio
from actors.transports.spawned import SpareSource, Spawned
from actors.transports.stdio import StdioConnector, StdioTransport
from actors.transports.stdio_hub import StdioHub

if TYPE_CHECKING:
    from actors.auth.provider import Authorizer, TokenVault
    from actors.transports.remote import RemoteConnector
    from actors.transports.websocket import WebSocketConnector


@asynccontextmanager
async def _unsupported(spec: ServerSpec) -> AsyncIterator[Transport]:
    raise SpawnError(
        f"mcp server {spec.name}: servers of type {spec.type!r} are not supported by this "
        "version yet (local stdio, remote HTTP and websocket bridge servers are); "
        "run it through a local stdio proxy meanwhile"
    )
    yield  # pragma: no cover


class TransportConnector:
    """The connector the supervisor hands to its connection actors."""

    def __init__(
        self,
        state_dir: Path | None = None,
        extra_secrets: tuple[str, ...] = (),
        *,
        vault: TokenVault | None = None,
        authorizer: Authorizer | None = None,
        instance: str | None = None,
    ) -> None:
        self._extra = extra_secrets
        self._vault = vault
        self._authorizer = authorizer
        self.hub = StdioHub()
        self._stdio = StdioConnector(state_dir, self._redactor, self.hub, instance)
        self._remote: RemoteConnector | None = None
        self._websocket: WebSocketConnector | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the local servers' stderr and exits from one task (the supervisor runs
        this first); without it, every local server runs a hub of its own."""
        await self.hub.run(task_status=task_status)

    def _redactor(self, spec: ServerSpec) -> Redactor:
        return Redactor((*spec.secrets, *self._extra))

    def open_raw(
        self, spec: ServerSpec, spares: SpareSource | None = None
    ) -> AbstractAsyncContextManager[RawStdio]:
        """A local server's process with raw line I/O (the bridge's passthrough), under
        the same hub, pidfiles and teardown as the supervisor's own local servers
        (a spare from ``spares`` when it has one)."""
        return self._stdio.of_kind(spec, RawStdio, spares)

    def open_local(
        self, spec: ServerSpec, spares: SpareSource
    ) -> AbstractAsyncContextManager[StdioTransport]:
        """A local server's transport on a spare from ``spares``, else on a new process."""
        return self._stdio.of_kind(spec, StdioTransport, spares)

    async def spawn_spare(self, spec: ServerSpec) -> Spawned:
        """A local server's process, spawned and idle, owned by the caller (a warm pool)."""
        return await self._stdio.spawn(spec)

    def __call__(self, spec: ServerSpec) -> AbstractAsyncContextManager[Transport]:
        if spec.type == "local":
            return self._stdio(spec)
        if spec.type == "remote":  # Streamable HTTP or legacy HTTP+SSE, by spec.transport
            if self._remote is None:
                # Imported on first use: the HTTP client costs ~30 ms of start-up that a
                # supervisor of local servers only would pay for nothing.
                from actors.transports.remote import RemoteConnector

                self._remote = RemoteConnector(self._redactor, vault=self._vault, authorizer=self._authorizer)
            return self._remote(spec)
        if spec.type == "websocket":  # a server behind a bridge hub
            if self._websocket is None:
                from actors.transports.websocket import WebSocketConnector  # on first use, as above

                self._websocket = WebSocketConnector(self._redactor)
            return self._websocket(spec)
        return _unsupported(spec)
