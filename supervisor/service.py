"""The Supervisor: the root nursery, the router, one connection actor per server.

``Supervisor.open`` cleans up orphans a crashed earlier run left behind, starts the
router, then the connection actors in config order under a one-for-one supervisor,
and yields. Leaving the context stops everything in reverse: sessions first (they are
nested inside), then connections (each tears its server down: stdin closed, SIGTERM,
SIGKILL, reaped), then the router. Teardown runs shielded under a deadline, also
when the host is cancelled.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.connection.actor import ConnectionActor
from actors.connection.messages import Command, ConnectionMessage, Control
from actors.connection.spec import Scope
from actors.mailbox import Channels, open_mailbox, try_send
from actors.router.actor import RouterActor, RouterMessage
from actors.router.catalog import ServerView
from actors.transports.base import Connector
from actors.transports.pidfiles import reap_orphans
from actors.transports.select import TransportConnector
from supervisor.one_for_one import ChildSpec, OneForOne
from supervisor.sessions import Session
from supervisor.settings.model import Config

log = logging.getLogger("supervisor")

DEFAULT_STATE_DIR = "~/.local/state/mcp-supervisor"
SHUTDOWN_GRACE_S = 10.0


@attrs.frozen(slots=True)
class Approval:
    """A host's answer to an approval request (DESIGN.md §6).

    ``remember``: ``once`` (default), ``session`` or ``always``.
    """

    decision: str
    remember: str = "once"

    def __attrs_post_init__(self) -> None:
        if self.decision not in ("allow", "deny"):
            raise ValueError(f"Approval decision must be 'allow' or 'deny', not {self.decision!r}")
        if self.remember not in ("once", "session", "always"):
            raise ValueError(f"Approval remember must be once, session or always, not {self.remember!r}")


Approver = Callable[[Any], Awaitable[Approval | str]]


def resolve_state_dir(config: Config, state_dir: str | os.PathLike[str] | None) -> Path:
    """The state directory: the argument, else the config's, else the default."""
    chosen = state_dir or config.state_dir or DEFAULT_STATE_DIR
    path = Path(chosen).expanduser()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


class Supervisor:
    """The running service; obtain one with ``Supervisor.open``."""

    def __init__(
        self,
        config: Config,
        router: RouterActor,
        router_mailbox: trio.MemorySendChannel[RouterMessage],
        connector: Connector,
        nursery: trio.Nursery,
        state_dir: Path,
        approver: Approver | None,
    ) -> None:
        self.config = config
        self.router = router
        self.router_mailbox = router_mailbox
        self.connector = connector
        self.state_dir = state_dir
        self.approver = approver
        self._nursery = nursery
        self._mailboxes: dict[str, trio.MemorySendChannel[ConnectionMessage]] = {}

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        config: Config,
        approver: Approver | None = None,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        connector: Connector | None = None,
    ) -> AsyncIterator[Supervisor]:
        """Run the supervisor for the duration of the ``async with`` block."""
        state_path = resolve_state_dir(config, state_dir)
        reaped = await trio.to_thread.run_sync(reap_orphans, state_path)
        if reaped:
            log.warning("cleaned up orphans", extra={"fields": {"pids": ",".join(map(str, reaped))}})
        connector = connector or TransportConnector(state_path, config.secrets)
        shared = [spec for spec in config.servers if spec.scope is Scope.SHARED]
        mailboxes: dict[str, Channels[ConnectionMessage]] = {spec.name: open_mailbox() for spec in shared}
        router_pair: Channels[RouterMessage] = open_mailbox(4096)
        router_send, router_receive = router_pair
        router = RouterActor([(spec, mailboxes[spec.name][0]) for spec in shared], router_receive)
        tree = OneForOne()
        async with trio.open_nursery() as nursery:
            await nursery.start(router.run)
            supervisor = cls(config, router, router_send, connector, nursery, state_path, approver)
            supervisor._mailboxes = {name: pair[0] for name, pair in mailboxes.items()}
            children = [supervisor._child(spec.name, mailboxes[spec.name][1], router_send) for spec in shared]
            await nursery.start(tree.run, children)
            log.info("supervisor started", extra={"fields": {"servers": len(config.servers)}})
            try:
                yield supervisor
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(SHUTDOWN_GRACE_S * 2):
                    await tree.stop()
                    router_send.close()
                nursery.cancel_scope.cancel()
                log.info("supervisor stopped", extra={"fields": {}})

    def _child(
        self,
        name: str,
        mailbox: trio.MemoryReceiveChannel[ConnectionMessage],
        router_send: trio.MemorySendChannel[RouterMessage],
    ) -> ChildSpec:
        spec = self.config.server(name)
        send = self._mailboxes[name]

        def start() -> Any:
            # A fresh actor per (re)start; the mailbox outlives it so senders keep working.
            return ConnectionActor(spec, self.connector, mailbox, router_send.clone()).run

        def request_stop() -> bool:
            return try_send(send, Command(Control.STOP))

        return ChildSpec(name, start, request_stop)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        """One conversation; its private connections end with it."""
        async with trio.open_nursery() as nursery:
            session = Session(self, nursery)
            try:
                yield session
            finally:
                with trio.CancelScope(shield=True):
                    await session._close(SHUTDOWN_GRACE_S)

    def servers(self) -> Mapping[str, ServerView]:
        """The shared servers as the router sees them now."""
        return self.router.cell.current.servers

    async def command(self, server: str, control: Control) -> None:
        """Restart, enable, disable or stop one shared server."""
        try:
            mailbox = self._mailboxes[server]
        except KeyError:
            raise KeyError(f"no server named {server!r}; known: {', '.join(self._mailboxes)}") from None
        await mailbox.send(Command(control))
