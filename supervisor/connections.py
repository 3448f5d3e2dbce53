"""How the supervisor builds connection actors, shared and private.

``ConnectionFactory`` holds what every connection actor of one supervisor is given
(the connector, the router's mailbox, the host's client capabilities and its
handler of server requests), so a session starts its private servers with the same
parts as the supervisor its shared ones, without seeing the supervisor.

``shared_child`` is one shared server as a child of the one-for-one supervisor
(``supervisor.one_for_one``): a fresh actor per (re)start on a mailbox that outlives
it, a stop request through that mailbox, and the parked start of an actor that
crashed too often.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from actors.connection.actor import ConnectionActor, Crashed, ServerRequestHandler
from actors.connection.messages import Command, ConnectionMessage, Control
from actors.connection.spec import ServerSpec
from actors.mailbox import Channels, try_send
from actors.router.actor import RouterMessage
from actors.transports.base import Connector
from supervisor.one_for_one import ChildSpec, Startable


@attrs.frozen(slots=True, eq=False)
class ConnectionFactory:
    """Builds the connection actors of one supervisor."""

    connector: Connector
    router: trio.MemorySendChannel[RouterMessage]
    client_capabilities: dict[str, Any] = attrs.field(factory=dict, converter=dict)
    """The host's, copied once; every actor reads this one dict (they never change it)."""
    server_requests: ServerRequestHandler | None = None

    def actor(
        self,
        spec: ServerSpec,
        mailbox: trio.MemoryReceiveChannel[ConnectionMessage],
        *,
        owner: str | None = None,
        restart: bool = True,
        crashed: Crashed | None = None,
    ) -> ConnectionActor:
        """A connection actor for ``spec`` that reads ``mailbox`` and publishes to the
        router (a private one: ``owner`` is its session, and it is never restarted)."""
        return ConnectionActor(
            spec,
            self.connector,
            mailbox,
            self.router.clone(),
            owner=owner,
            restart=restart,
            client_capabilities=self.client_capabilities,
            server_requests=self.server_requests,
            crashed=crashed,
        )


def shared_child(
    spec: ServerSpec, mailbox: Channels[ConnectionMessage], factory: ConnectionFactory
) -> ChildSpec:
    """One shared server as a child of the one-for-one supervisor."""
    send, receive = mailbox
    last_delay = spec.reconnect_schedule_s[-1]

    def start(crashed: Crashed | None = None) -> Startable:
        # A fresh actor per (re)start; the mailbox outlives it so senders keep working.
        return factory.actor(spec, receive, crashed=crashed).run

    def park(crash: Exception) -> Startable:
        # A bug of ours fails this server only: it waits in backoff (condition
        # "crashed") and tries again at its schedule's last delay, forever.
        what = f"{type(crash).__name__}: {crash}"[:200]
        reason = (
            f"mcp server {spec.name}: its connection actor crashed ({what}); next try in "
            f"{last_delay:g} s (a bug in mcp-supervisor: please report it with the log)"
        )
        return start(Crashed(reason, last_delay))

    def request_stop() -> bool:
        return try_send(send, Command(Control.STOP))

    return ChildSpec(spec.name, start, request_stop, park=park, park_s=last_delay)
