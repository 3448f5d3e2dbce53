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

    def sent(self, request_id: RequestId | None, protocol_version: str | None) -> None:
        """The request went out under ``request_id`` (again, for a retried round; None:
        not known to the caller, the era's opening)."""
        ...

    def refused(self, code: int) -> None:
        """The server answered with JSON-RPC error ``code``."""
        ...


class AttemptTrace(Protocol):
    """The span of one connection attempt, from its start until the server is ready
    (or the attempt ends): the connection's own first requests are its children, and
    its state changes are its events and carry its ids in the log."""

    @property
    def parent(self) -> object:
        """The context the attempt's requests are children of (None once it ended)."""
        ...

    def state(self, state: str, reason: str | None) -> tuple[str, str] | None:
        """A state change of the attempt, an event of its span; its ``trace_id`` and
        ``span_id`` (hex) for the change's log line, None once it ended."""
        ...

    def ready(self) -> None:
        """The server is ready: the span ends; the session it opened lasts on."""
        ...

    def closed(self) -> None:
        """The connection is gone: the span ends now if it had not (a failed attempt),
        and a session that was ready is measured (``mcp.client.session.duration``)."""
        ...


class Tracing(Protocol):
    """The tracer the supervisor sets: spans for the connection's own requests."""

    def request_span(
        self, server: str, method: str, target: str, *, parent: object = None
    ) -> AbstractContextManager[RequestTrace]:
        """A CLIENT span for one request of the connection's own (``tools/list``,
        ``initialize``), a child of ``parent`` (an attempt's) when given, else a root
        span: never a child of whatever context the calling task carries."""
        ...

    def attempt_span(self, server: str) -> AttemptTrace:
        """The span of a connection attempt that begins now (``AttemptTrace``)."""
        ...


class _NoAttempt:
    """The attempt of a connection while traces are off: nothing at all."""

    parent = None

    def state(self, state: str, reason: str | None) -> None:
        return None

    def ready(self) -> None:
        pass

    def closed(self) -> None:
        pass


NO_ATTEMPT: AttemptTrace = _NoAttempt()


def attempt_trace(server: str) -> AttemptTrace:
    """The span of an attempt beginning now, or ``NO_ATTEMPT`` with traces off."""
    tracing = HOOK.tracing
    return NO_ATTEMPT if tracing is None else tracing.attempt_span(server)


class Hook:
    """Where the tracer is set: one slot, read with one attribute check."""

    __slots__ = ("tracing",)

    def __init__(self) -> None:
        self.tracing: Tracing | None = None


HOOK = Hook()
