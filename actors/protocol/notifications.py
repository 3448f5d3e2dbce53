"""Server notifications as typed events, without I/O.

``ClientSession`` turns each notification the server sends into one of these
(``notification_event``): list changes of each kind (with the ``subscriptions/listen``
request they belong to, in the 2026-07-28 era), the acknowledgement of such a request,
a subscribed resource's update, a log record, progress for one of our requests, the
server cancelling one of our requests; anything else (or anything malformed) is a
plain ``ServerNotification``.
"""

from __future__ import annotations

from typing import Any, TypeAlias, TypeGuard

import attrs

from actors.protocol.listen import ACKNOWLEDGED, honored_uris, subscription_of
from actors.protocol.messages import Params, RequestId, Untied


@attrs.frozen(slots=True)
class ToolsListChanged:
    """``notifications/tools/list_changed``; ``subscription``: the listen request it
    came for (its ``_meta`` names it), None in the handshake era."""

    subscription: RequestId | None = None


@attrs.frozen(slots=True)
class ResourcesListChanged:
    """``notifications/resources/list_changed`` (resources and templates)."""

    subscription: RequestId | None = None


@attrs.frozen(slots=True)
class PromptsListChanged:
    """``notifications/prompts/list_changed``."""

    subscription: RequestId | None = None


ListChanged: TypeAlias = ToolsListChanged | ResourcesListChanged | PromptsListChanged


@attrs.frozen(slots=True)
class ListenAcknowledged:
    """``notifications/subscriptions/acknowledged``: the server took the listen
    request ``subscription`` and will send what it agreed to, updates of the
    ``resources`` named among them."""

    subscription: RequestId | None
    resources: tuple[str, ...] = ()


@attrs.frozen(slots=True)
class Cancelled:
    """``notifications/cancelled`` from the server, naming one of our requests (a
    server ends a ``subscriptions/listen`` request this way, as the SDK's does)."""

    request_id: RequestId


@attrs.frozen(slots=True)
class ResourceChanged:
    """``notifications/resources/updated``: the resource at ``uri`` changed."""

    uri: str


@attrs.frozen(slots=True)
class LogMessage:
    """``notifications/message``: one of the server's log records, as sent (its
    ``level`` is an RFC 5424 name; ``data`` is any JSON); ``related``: the request of
    ours it came for, when the transport knows (``Notification.related``)."""

    level: str
    logger: str | None
    data: Any
    related: RequestId | Untied | None = attrs.field(default=None, eq=False, kw_only=True)


@attrs.frozen(slots=True)
class ProgressReceived:
    """``notifications/progress`` for one of our requests."""

    token: RequestId
    progress: float
    total: float | None = None
    message: str | None = None


@attrs.frozen(slots=True)
class ServerNotification:
    """Any other notification (logging, resources, cancellations of server requests)."""

    method: str
    params: Params


Notified: TypeAlias = (
    ToolsListChanged
    | ResourcesListChanged
    | PromptsListChanged
    | ListenAcknowledged
    | Cancelled
    | ResourceChanged
    | LogMessage
    | ProgressReceived
    | ServerNotification
)

_SIGNALS: dict[str, type[ListChanged]] = {
    "notifications/tools/list_changed": ToolsListChanged,
    "notifications/resources/list_changed": ResourcesListChanged,
    "notifications/prompts/list_changed": PromptsListChanged,
}


def notification_event(method: str, params: Params, related: RequestId | Untied | None = None) -> Notified:
    """The event for one notification from the server (``related``: the request of ours
    whose answer stream carried it, if the transport knows). A log message is looked for
    first: a flooding server sends nothing else."""
    if method == "notifications/message" and isinstance(params, dict):
        level, logger = params.get("level"), params.get("logger")
        if isinstance(level, str):
            named = logger if isinstance(logger, str) else None
            return LogMessage(level, named, params.get("data"), related=related)
    signal = _SIGNALS.get(method)
    if signal is not None:
        return signal(subscription_of(params))
    if method == ACKNOWLEDGED:
        return ListenAcknowledged(subscription_of(params), honored_uris(params))
    if not isinstance(params, dict):
        return ServerNotification(method, params)
    if method == "notifications/cancelled" and _is_id(params.get("requestId")):
        return Cancelled(params["requestId"])
    if method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
        return ResourceChanged(params["uri"])
    if method == "notifications/progress":
        token = params.get("progressToken")
        progress = params.get("progress")
        if _is_id(token) and _is_number(progress):
            total = params.get("total")
            text = params.get("message")
            return ProgressReceived(
                token,
                float(progress),
                float(total) if _is_number(total) else None,
                text if isinstance(text, str) else None,
            )
    return ServerNotification(method, params)


def _is_id(value: object) -> TypeGuard[RequestId]:
    # bool is an int to Python: a token of true would match request id 1.
    return isinstance(value, int | str) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
