"""Whether traces are on, and the small API the rest of the supervisor calls.

Nothing here imports OpenTelemetry: ``enable`` (at ``Supervisor.open``) loads
``supervisor/runtime/otel.py`` when the optional ``otel`` extra is installed and sets
``TRACING.active`` (and the machinery's hook, ``actors/tracing.py``). Until then, and
for good without the extra, a caller pays one attribute check: ``TRACING.active is None``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from actors.connection.messages import CallOutcome, CallTool
from actors.log_events import get_logger
from actors.spec import ServerSpec
from actors.tracing import HOOK, RequestTrace, Tracing

log = get_logger("supervisor.tracing")


class ClientTrace(RequestTrace, Protocol):
    """A CLIENT span of a request of a turn, with what the supervisor learns of it."""

    def answered(self, outcome: CallOutcome) -> None:
        """The connection's answer: ``error.type`` (the envelope code) when it failed."""
        ...


class ServerTrace(Protocol):
    """A SERVER span of a request a front received (the gateway, the admin API)."""

    def ended(self, code: str | None, status: int | None = None) -> None:
        """How the request ended: ``error.type`` (None: it succeeded) and the JSON-RPC
        error code of an error answer (``rpc.response.status_code``)."""
        ...


class SupervisorTracing(Tracing, Protocol):
    """What the supervisor's own code asks of the tracer."""

    def call_span(self, kind: str, target: str, epoch: int) -> AbstractContextManager[None]:
        """Our INTERNAL span around one request of a turn (``mcp_supervisor.*``)."""
        ...

    def client_span(self, spec: ServerSpec, call: CallTool) -> AbstractContextManager[ClientTrace]:
        """The CLIENT span of one request sent to a server for a turn."""
        ...

    def approval_span(self, tool: str) -> AbstractContextManager[None]:
        """The wait for an approver, a child of the call's span."""
        ...

    def server_span(
        self,
        method: str,
        target: str,
        meta: Mapping[str, Any] | None,
        transport: str,
        *,
        headers: Mapping[str, str] | None = None,
        request_id: str | int | None = None,
        session_id: str | None = None,
        protocol_version: str | None = None,
        client: tuple[str, int] | None = None,
    ) -> AbstractContextManager[ServerTrace]:
        """A SERVER span for a request received, its parent taken from ``meta``
        (``params._meta``) or else the ``traceparent`` of ``headers``."""
        ...

    def ended(self, server: str, decision: str, outcome: str) -> None:
        """A request of a turn ended (its audit row): our attributes on its call span."""
        ...

    def session_ended(self, seconds: float, transport: str, protocol_version: str | None) -> None:
        """A gateway client's session ended (``mcp.server.session.duration``)."""
        ...

    def decided(self, rule: int) -> None:
        """The trust rule (its 0-based place in the config) that decided the current
        request of a turn: ``mcp_supervisor.trust.rule`` on its span."""
        ...

    def trace_id(self) -> str | None:
        """The current trace's id (32 hex digits), for an audit row; None untraced."""
        ...

    def current_ids(self) -> tuple[str, str] | None:
        """The current span's trace and span ids (32 and 16 lowercase hex digits), for a
        log line; None when no valid span is current."""
        ...

    def annotate(self, attributes: Mapping[str, str]) -> None:
        """More attributes on the current call's span (what the config's ``tracing``
        opts in to: ``supervisor/calls/span_content.py``); nothing outside one."""
        ...


class Tracer:
    """The one slot: None while traces are off."""

    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active: SupervisorTracing | None = None


TRACING = Tracer()


def enable() -> bool:
    """Switch traces on if the OpenTelemetry API is importable (idempotent); whether
    they are on. The spans go to the global tracer provider: an embedding host's own,
    or the one ``configure_from_environment`` sets for ``serve``, ``stdio``, ``bridge``.
    With no provider set by then, traces stay off: OpenTelemetry's default records
    nothing, and a call should not pay for spans that go nowhere (set the provider
    before ``Supervisor.open``)."""
    if TRACING.active is None:
        try:
            from supervisor.runtime.otel import OtelTracing, provider_is_set
        except ImportError:
            return False
        if not provider_is_set():  # spans nobody records: no cost at all instead
            return False
        from supervisor.runtime.otel_metrics import otel_metrics

        TRACING.active = HOOK.tracing = OtelTracing(meters=otel_metrics())
    return True


def disable() -> None:
    """Traces off (tests; an embedding host that wants none)."""
    TRACING.active = HOOK.tracing = None


_ASKING = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


def environment_problem(environ: Mapping[str, str] = os.environ) -> str | None:
    """What is wrong with the ``OTEL_*`` variables (an exporter we do not have), in
    one line, for ``serve`` and ``stdio`` to print before they start; None if nothing."""
    if not any(environ.get(name) for name in _ASKING):
        return None
    try:
        from supervisor.runtime.otel import check_exporters
    except ImportError:
        return None  # traces_from_environment warns
    return check_exporters(environ)


@contextmanager
def traces_from_environment(environ: Mapping[str, str] = os.environ) -> Iterator[None]:
    """For ``serve``, ``stdio`` and ``bridge``: while the block runs, traces go where the
    standard ``OTEL_*`` variables say (``supervisor/runtime/otel.py``), and what is
    buffered is flushed when it ends. Without those variables OpenTelemetry is not even
    imported; with them but without the ``otel`` extra, one warning says so."""
    if not any(environ.get(name) for name in _ASKING):
        yield
        return
    try:
        from supervisor.runtime.otel import configure_from_environment
    except ImportError:
        log.warning("OTEL_* variables are set but the otel extra is not installed: no traces")
        yield
        return
    providers = configure_from_environment(environ)
    try:
        yield
    finally:
        for provider in providers:
            provider.shutdown()
