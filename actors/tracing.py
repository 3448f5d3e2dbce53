"""The tracing hook of the machinery: a no-op until the supervisor sets it.

``actors/`` never imports OpenTelemetry (nor ``supervisor/``): what it needs of a
tracer is the two protocols below, and ``HOOK.tracing`` is None until
``Supervisor.open`` finds the optional ``otel`` extra and sets it
(``supervisor/runtime/otel.py``). With it unset, the hot path pays one attribute
check: a call's ``CallTool.trace`` is None and nothing is allocated.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Protocol

from actors.protocol.http_framing import TRACE_META_KEYS as TRACE_META_KEYS
from actors.protocol.messages import RequestId


class RequestTrace(Protocol):
    """One traced request we send a server: its CLIENT span, as the connection sees it."""

    @property
    def meta(self) -> Mapping[str, str]:
        """What goes into the request's ``params._meta`` (``TRACE_META_KEYS``)."""
        ...

    def sent(self, request_id: RequestId, protocol_version: str | None) -> None:
        """The request went out under ``request_id`` (again, for a retried round)."""
        ...


class Tracing(Protocol):
    """The tracer the supervisor sets: spans for the connection's own requests."""

    def request_span(
        self, server: str, method: str, target: str, *, root: bool
    ) -> AbstractContextManager[RequestTrace | None]:
        """A CLIENT span for one request of the connection's own (``tools/list``,
        ``ping``); None when it makes none (``root`` False and no trace is current)."""
        ...


class Hook:
    """Where the tracer is set: one slot, read with one attribute check."""

    __slots__ = ("tracing",)

    def __init__(self) -> None:
        self.tracing: Tracing | None = None


HOOK = Hook()
