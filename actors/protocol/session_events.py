"""The events a ``ClientSession`` yields (``session.py``, which re-exports them): what
the server answered, asked or announced, typed, without I/O. The server's
notifications are ``notifications.py``'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs

from actors.protocol.era import ProbeOutcome
from actors.protocol.messages import DiscoverResult, ErrorObject, InitializeResult, Params, RequestId, Untied
from actors.protocol.notifications import Notified


@attrs.frozen(slots=True)
class Initialized:
    """The server accepted ``initialize``; ``notifications/initialized`` is queued."""

    result: InitializeResult


@attrs.frozen(slots=True)
class Adopted:
    """After a fall back, ``initialize`` failed and the probe we fell back from
    answered late with our per-request era: the session adopted it (READY)."""

    result: DiscoverResult


@attrs.frozen(slots=True)
class DiscoverAnswered:
    """``server/discover`` ended: how (``era.after_probe`` says what follows), the
    result if the server speaks our per-request era, and what it said otherwise."""

    outcome: ProbeOutcome
    result: DiscoverResult | None = None
    detail: str = ""


@attrs.frozen(slots=True)
class ResponseReceived:
    """A result for a request we sent."""

    id: RequestId
    method: str
    result: Mapping[str, Any]


@attrs.frozen(slots=True)
class ErrorReceived:
    """An error for a request we sent."""

    id: RequestId
    method: str
    error: ErrorObject


@attrs.frozen(slots=True)
class StrayResponse:
    """A response to no pending request (e.g. one we gave up on); safe to drop."""

    id: RequestId | None


@attrs.frozen(slots=True)
class ServerRequest:
    """A request from the server (sampling, elicitation, roots, …) awaiting our answer."""

    id: RequestId
    method: str
    params: Params
    related: RequestId | Untied | None = None  # the request of ours it belongs to (Request.related)


Event: TypeAlias = (
    Initialized
    | Adopted
    | DiscoverAnswered
    | ResponseReceived
    | ErrorReceived
    | StrayResponse
    | ServerRequest
    | Notified
)
