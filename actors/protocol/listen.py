"""``subscriptions/listen`` (2026-07-28, SEP-2575) without I/O: its names, the filter
a server's capabilities offer, how its frames are told apart, and what follows its end.

In the per-request era a server sends list changes only to a client that asked for
them with ``subscriptions/listen``. The request stays open: the server first sends
``notifications/subscriptions/acknowledged`` (what it agreed to send), then each
change notification, and answers the request only when it ends the subscription.
Every one of those frames carries the request's id in
``_meta["io.modelcontextprotocol/subscriptionId"]``, which is how a client that shares
one channel with its other requests (stdio) tells them apart. Over Streamable HTTP the
request is a stream of its own (``actors/transports/listen_stream.py``); over a duplex
transport it is one more request on the connection (``actors/connection/listener.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from actors.protocol.messages import METHOD_NOT_FOUND, Params, RequestId

LISTEN = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
"""The ``_meta`` key of every frame of a subscription: the listen request's id."""
RESOURCE_SUBSCRIPTIONS = "resourceSubscriptions"
"""The filter's key naming the URIs whose ``notifications/resources/updated`` are wanted."""

REOPEN_ATTEMPTS = 3
"""Attempts in a row to open a listen request (or stream) that end before it was
acknowledged; the last of them loses the connection."""
REOPEN_AFTER_S = 1.0
"""How long a listen request that ended waits before it is sent again (a server that
ends every subscription at once is polled, not flooded)."""

_LIST_CHANGES = {
    "tools": "toolsListChanged",
    "resources": "resourcesListChanged",
    "prompts": "promptsListChanged",
}


def listen_filter(answer: Mapping[str, Any]) -> dict[str, bool]:
    """The list changes an answer that opens the era (``server/discover``, or an
    ``initialize`` naming its version) offers through the ``capabilities`` it declares
    (``listChanged`` of tools, resources, prompts), as a ``subscriptions/listen``
    filter; empty: nothing to hear, which in this era only a listen request carries."""
    capabilities = answer.get("capabilities")
    if not isinstance(capabilities, Mapping):
        return {}
    wanted: dict[str, bool] = {}
    for kind, key in _LIST_CHANGES.items():
        declared = capabilities.get(kind)
        if isinstance(declared, Mapping) and declared.get("listChanged") is True:
            wanted[key] = True
    return wanted


def listen_params(notifications: Mapping[str, Any]) -> dict[str, Any]:
    """The params of a ``subscriptions/listen`` request for ``notifications``."""
    return {"notifications": dict(notifications)}


def honored_uris(params: Params) -> tuple[str, ...]:
    """The resource URIs an acknowledgement agreed to send updates of (the server may
    agree to less than was asked)."""
    agreed = params.get("notifications") if isinstance(params, dict) else None
    uris = agreed.get(RESOURCE_SUBSCRIPTIONS) if isinstance(agreed, dict) else None
    return tuple(uri for uri in uris if isinstance(uri, str)) if isinstance(uris, list) else ()


def subscription_of(params: Params) -> RequestId | None:
    """The subscription a notification belongs to (its listen request's id), or None
    when it names none (a handshake-era notification)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    found = meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None
    if isinstance(found, int | str) and not isinstance(found, bool):
        return found
    return None


class AfterListen(enum.Enum):
    """What follows a listen request's end (one we did not ask for)."""

    REOPEN = "reopen"  # send it again, after REOPEN_AFTER_S
    STOP = "stop"  # the server does not serve it: no listening on this connection
    LOST = "lost"  # it cannot be kept open: the connection counts as lost


def after_listen(*, acknowledged: bool, code: int | None, failures: int) -> tuple[AfterListen, int]:
    """What follows a listen request that ended, and the failures in a row so far.
    ``code``: the JSON-RPC error it was answered with (None: a result, or the server
    cancelled it).

    | how it ended                                  | next    | failures in a row |
    |-----------------------------------------------|---------|-------------------|
    | refused with -32601 (method not found)        | stop    | unchanged         |
    | after its acknowledgement (its result, an     | reopen  | 0                 |
    | error, or the server cancelled it)            |         |                   |
    | before it, fewer than REOPEN_ATTEMPTS in a row| reopen  | one more          |
    | before it, the REOPEN_ATTEMPTS-th in a row    | lost    | REOPEN_ATTEMPTS   |
    """
    if code == METHOD_NOT_FOUND:
        return AfterListen.STOP, failures
    if acknowledged:
        return AfterListen.REOPEN, 0
    failures += 1
    return (AfterListen.LOST if failures >= REOPEN_ATTEMPTS else AfterListen.REOPEN), failures
