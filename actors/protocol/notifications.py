"""Server notifications as typed events, without I/O.

``ClientSession`` turns each notification the server sends into one of these
(``notification_event``): list changes of each kind, a subscribed resource's update,
a log record, progress for one of our requests; anything else (or anything malformed)
is a plain ``ServerNotification``.
"""

from __future__ import annotations

from typing import Any, TypeAlias, TypeGuard

import attrs

from actors.protocol.messages import Params, RequestId


@attrs.frozen(slots=True)
class ToolsListChanged:
    """``notifications/tools/list_changed``."""


@attrs.frozen(slots=True)
class ResourcesListChanged:
    """``notifications/resources/list_changed`` (resources and templates)."""


@attrs.frozen(slots=True)
class PromptsListChanged:
    """``notifications/prompts/list_changed``."""


@attrs.frozen(slots=True)
class ResourceChanged:
    """``notifications/resources/updated``: the resource at ``uri`` changed."""

    uri: str


@attrs.frozen(slots=True)
class LogMessage:
    """``notifications/message``: one of the server's log records, as sent (its
    ``level`` is an RFC 5424 name; ``data`` is any JSON)."""

    level: str
    logger: str | None
    data: Any


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
    | ResourceChanged
    | LogMessage
    | ProgressReceived
    | ServerNotification
)

_SIGNALS: dict[str, Notified] = {
    "notifications/tools/list_changed": ToolsListChanged(),
    "notifications/resources/list_changed": ResourcesListChanged(),
    "notifications/prompts/list_changed": PromptsListChanged(),
}


def notification_event(method: str, params: Params) -> Notified:
    """The event for one notification from the server."""
    signal = _SIGNALS.get(method)
    if signal is not None:
        return signal
    if not isinstance(params, dict):
        return ServerNotification(method, params)
    if method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
        return ResourceChanged(params["uri"])
    if method == "notifications/message" and isinstance(params.get("level"), str):
        logger = params.get("logger")
        return LogMessage(params["level"], logger if isinstance(logger, str) else None, params.get("data"))
    if method == "notifications/progress":
        token = params.get("progressToken")
        progress = params.get("progress")
        # bool is an int to Python: a token of true would match request id 1.
        if isinstance(token, int | str) and not isinstance(token, bool) and _is_number(progress):
            total = params.get("total")
            text = params.get("message")
            return ProgressReceived(
                token,
                float(progress),
                float(total) if _is_number(total) else None,
                text if isinstance(text, str) else None,
            )
    return ServerNotification(method, params)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
