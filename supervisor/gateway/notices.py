"""What one gateway client hears besides answers to its requests.

A front runs ``run_notices(peer, outlet, cell)`` as a task for each handshake-era
client, with the client's standalone outlet (the stdio peer: stdout; Streamable
HTTP: the GET stream). It sends, once the client initialized:

- ``notifications/{tools,resources,prompts}/list_changed`` when THIS client's view
  changed: after each catalog change (or a ``tool_search`` call of this client that
  activated tools) it compares what the client's latest listing of each kind showed
  (``GatewayCore.shown``) with what a listing would show now for its session
  (``Session.preview_turn``), and sends only on a difference, once per difference.
  Clients whose view did not change hear nothing; a kind the client never listed, or
  the gateway does not declare, is never announced.
- ``notifications/resources/updated`` for the session's subscriptions.
- ``notifications/elicitation/complete`` for each sign-in to a ``per_user`` server it was
  sent as a URL elicitation (-32042), once its person's browser came back.
- the servers' log messages tied to no call (``notifications/message``; redacted and
  bounded as we logged them) at or above the client's ``logging/setLevel`` level,
  ``logger`` naming the server, from the shared servers and the session's own private
  ones. (A message tied to one of its calls comes on that call's stream instead:
  ``core.py``; the level it sets is also what its servers are asked for, with every
  other client's: ``Session.want_logs``.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import trio

from actors.connection.server_log import ServerLogged, admits
from actors.router.actor import CatalogCell
from actors.router.catalog import Catalog
from supervisor.gateway.core import GatewayCore, view_digest
from supervisor.gateway.outlet import Outlet
from supervisor.gateway.peer import GatewayPeer
from supervisor.gateway.related import log_notification
from supervisor.runtime.sign_ins import SignIn

# A listing kind → the notification that announces its change, and the capability
# the gateway must have declared to send it.
_ANNOUNCED = {
    "tools": ("notifications/tools/list_changed", "tools"),
    "resources": ("notifications/resources/list_changed", "resources"),
    "templates": ("notifications/resources/list_changed", "resources"),
    "prompts": ("notifications/prompts/list_changed", "prompts"),
}


def _note(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


class ViewWatch:
    """Which list_changed notices one client is owed (see the module docstring)."""

    def __init__(self, core: GatewayCore) -> None:
        self.core = core
        # kind → (what was shown, what we announced since): a view announced once is
        # not announced again until the client lists anew.
        self._announced: dict[str, tuple[bytes, bytes]] = {}

    def owed(self) -> list[str]:
        """The notifications to send now, each once."""
        core = self.core
        if not core.shown:
            return []
        declared = core.capabilities()
        preview = core.session.preview_turn()
        methods: list[str] = []
        for kind, shown in core.shown.items():
            method, capability = _ANNOUNCED[kind]
            if capability not in declared:
                continue
            now = view_digest(core.listed(kind, preview))
            if now == shown or self._announced.get(kind) == (shown, now):
                continue
            self._announced[kind] = (shown, now)
            if method not in methods:
                methods.append(method)
        return methods


async def run_notices(peer: GatewayPeer, outlet: Outlet, cell: CatalogCell) -> None:
    """Send ``peer``'s client its notices through ``outlet`` until cancelled."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_views, peer, outlet, cell)
        nursery.start_soon(_resource_updates, peer, outlet)
        nursery.start_soon(_server_logs, peer, outlet)
        nursery.start_soon(_sign_ins_done, peer, outlet)


async def _views(peer: GatewayPeer, outlet: Outlet, cell: CatalogCell) -> None:
    watch = ViewWatch(peer.core)
    wake = trio.Event()

    def wake_up() -> None:
        wake.set()

    peer.core.on_activation = wake_up

    async def announce() -> None:
        if peer.initialized:
            for method in watch.owed():  # each marked as sent before the first await
                await outlet.send(_note(method))

    peer.core.announce = announce

    async def catalog_changes() -> None:
        seen: Catalog = cell.current

        def moved(catalog: Catalog) -> bool:
            return catalog is not seen

        while True:
            seen = await cell.wait_until(moved)
            wake.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(catalog_changes)
        while True:
            await wake.wait()
            wake = trio.Event()
            await announce()


async def _resource_updates(peer: GatewayPeer, outlet: Outlet) -> None:
    async for update in peer.session.resource_updates:
        if peer.initialized:
            await outlet.send(_note("notifications/resources/updated", {"uri": update.uri}))


async def _server_logs(peer: GatewayPeer, outlet: Outlet) -> None:
    session = peer.session
    with session.server_logs.subscribe() as logs:
        async for record in logs.events:
            if _for_client(peer, record):
                await outlet.send(log_notification(record))


async def _sign_ins_done(peer: GatewayPeer, outlet: Outlet) -> None:
    """``notifications/elicitation/complete`` for each sign-in this client was sent (as a
    URL elicitation) once its person's browser came back."""
    sign_ins = peer.session.sign_ins
    if sign_ins is None:
        return
    send, receive = trio.open_memory_channel[str](math.inf)

    def finished(sign_in: SignIn) -> None:
        if sign_in.id in peer.core.elicitations:
            peer.core.elicitations.discard(sign_in.id)
            send.send_nowait(sign_in.id)

    with sign_ins.listening(finished):
        async for elicitation in receive:
            await outlet.send(_note("notifications/elicitation/complete", {"elicitationId": elicitation}))


def _for_client(peer: GatewayPeer, record: ServerLogged) -> bool:
    """A shared server's message, or one of this session's own servers', at a level
    the client asked for, when the gateway declares logging."""
    if record.owner is not None and record.owner != peer.session.id:
        return False
    if not peer.initialized or not admits(peer.core.log_level, record.level):
        return False
    return "logging" in peer.core.capabilities()
