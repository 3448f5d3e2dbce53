"""``subscriptions/listen`` for new-era gateway clients: one long-lived request whose
stream carries the notifications the client opted in to, until it hangs up.

The request's ``notifications`` filter opts in to ``toolsListChanged``,
``promptsListChanged``, ``resourcesListChanged`` and ``resourceSubscriptions`` (URIs
whose ``notifications/resources/updated`` the client wants; they replace
``resources/subscribe``). The first message is ``notifications/subscriptions/
acknowledged`` with what we agreed to (only what the gateway serves); every message
carries ``_meta["io.modelcontextprotocol/subscriptionId"]``, the request's id. A list
change is one of the tenant's view of the catalog (tools by fingerprint, prompts and
resources by name). Resource updates come from the tenant session's subscriptions,
shared by its listen streams and left when the last stream that wanted a URI ends
(``fanout.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from actors.router.actor import CatalogCell
from actors.router.catalog import Catalog
from supervisor.gateway.fanout import ResourceFanout
from supervisor.gateway.outlet import Outlet
from supervisor.gateway.results import INVALID_PARAMS, JsonRpcError
from supervisor.sessions.session import Session
from supervisor.sessions.subscriptions import ResourceUpdate

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
UNSUBSCRIBE_TIMEOUT_S = 5.0
_LIST_FLAGS = {
    "toolsListChanged": ("tools", "notifications/tools/list_changed"),
    "promptsListChanged": ("prompts", "notifications/prompts/list_changed"),
    "resourcesListChanged": ("resources", "notifications/resources/list_changed"),
}


def _shape(catalog: Catalog) -> dict[str, frozenset[Any]]:
    """What a list change is measured on, per list."""
    return {
        "tools": frozenset((entry.id, entry.fingerprint) for entry in catalog.tools.values()),
        "prompts": frozenset(catalog.prompts),
        "resources": frozenset(catalog.resources) | frozenset(catalog.templates),
    }


async def listen(
    request_id: Any,
    params: Mapping[str, Any],
    outlet: Outlet,
    session: Session,
    capabilities: Mapping[str, Any],
    cell: CatalogCell,
    fanout: ResourceFanout,
) -> None:
    """Serve one listen stream until cancelled (the client hung up)."""
    wanted = params.get("notifications")
    if not isinstance(wanted, Mapping):
        raise JsonRpcError(INVALID_PARAMS, "subscriptions/listen: params.notifications must be an object")
    uris = wanted.get("resourceSubscriptions", [])
    if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
        raise JsonRpcError(
            INVALID_PARAMS, "subscriptions/listen: resourceSubscriptions must be an array of URIs"
        )
    meta = {SUBSCRIPTION_ID: request_id}
    lists = {flag: _LIST_FLAGS[flag] for flag in _LIST_FLAGS if wanted.get(flag) is True}
    lists = {flag: what for flag, what in lists.items() if what[0] in capabilities}
    send, receive = trio.open_memory_channel[ResourceUpdate](64)
    key = id(send)
    try:
        agreed: dict[str, Any] = dict.fromkeys(lists, True)
        if uris and "resources" in capabilities:
            agreed["resourceSubscriptions"] = await fanout.join(key, uris, send)
        ack = {"notifications": agreed, "_meta": meta}
        await outlet.send(
            {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": ack}
        )
        async with trio.open_nursery() as nursery:
            if lists:
                nursery.start_soon(_list_changes, lists, outlet, session, cell, meta)
            async for update in receive:
                note = {"uri": update.uri, "_meta": meta}
                await outlet.send(
                    {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": note}
                )
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(UNSUBSCRIBE_TIMEOUT_S):
            await fanout.leave(key)


async def _list_changes(
    lists: Mapping[str, tuple[str, str]],
    outlet: Outlet,
    session: Session,
    cell: CatalogCell,
    meta: Mapping[str, Any],
) -> None:
    seen = cell.current
    shape = _shape(session.view_of(seen))
    while True:
        seen = await cell.wait_until(lambda catalog, seen=seen: catalog is not seen)  # type: ignore[misc]
        now = _shape(session.view_of(seen))
        for what, method in lists.values():
            if now[what] != shape[what]:
                await outlet.send({"jsonrpc": "2.0", "method": method, "params": {"_meta": dict(meta)}})
        shape = now
