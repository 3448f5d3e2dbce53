"""Traces by OpenTelemetry: the tracer ``supervisor/runtime/tracing.py`` loads when the
``otel`` extra is installed. Nothing else imports this module.

Spans follow OpenTelemetry's MCP semantic conventions: ``{mcp.method.name} {target}``,
kind CLIENT for a request we send a server, SERVER for one a front receives; what is
ours is under ``mcp_supervisor.``. The context travels unprefixed in ``params._meta``
(``traceparent``, ``tracestate``, ``baggage``: the global propagator's fields); baggage is
passed on and never put in an attribute. Every span is a ``with`` block of the task
that waits for the request, so it ends exactly once, whatever ends the wait.
"""

from __future__ import annotations

import contextvars
import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import trio
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, StatusCode

from actors.connection.messages import CallFailed, CallOutcome, CallSucceeded, CallTool
from actors.protocol.messages import RequestId
from actors.spec import ServerSpec
from actors.tracing import TRACE_META_KEYS
from supervisor.runtime.otel_metrics import OtelMetrics

_CALL_SPAN: contextvars.ContextVar[Span | None] = contextvars.ContextVar("mcp_supervisor_call", default=None)
"""Our span of the request of a turn the current task is in (``ended`` annotates it)."""

_TARGET_ATTRIBUTE = {
    "tools/call": "gen_ai.tool.name",
    "prompts/get": "gen_ai.prompt.name",
    "resources/read": "mcp.resource.uri",
    "resources/subscribe": "mcp.resource.uri",
    "resources/unsubscribe": "mcp.resource.uri",
}


def request_attributes(method: str, target: str) -> dict[str, Any]:
    """The convention's attributes of a request by its method and target."""
    attributes: dict[str, Any] = {"mcp.method.name": method}
    key = _TARGET_ATTRIBUTE.get(method)
    if key is not None and target:
        attributes[key] = target
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
    return attributes


def peer_attributes(spec: ServerSpec) -> dict[str, Any]:
    """Where the server is: ``network.transport``, and for a remote one its address."""
    if spec.url is None:
        return {"network.transport": "pipe", "mcp_supervisor.server": spec.name}
    parts = urlsplit(spec.url)
    attributes: dict[str, Any] = {"network.transport": "tcp", "mcp_supervisor.server": spec.name}
    if parts.hostname:
        attributes["server.address"] = parts.hostname
        attributes["server.port"] = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
    return attributes


def error_type(outcome: CallOutcome) -> str | None:
    """The envelope code of a failed request (``tool_error`` for a result with
    ``isError``); None when it succeeded."""
    if isinstance(outcome, CallFailed):
        return outcome.code
    if isinstance(outcome, CallSucceeded) and outcome.result.is_error:
        return "tool_error"
    return None


def _injected(span: Span) -> dict[str, str]:
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


class _RequestTrace:
    """A CLIENT span as the connection and the turn see it."""

    __slots__ = ("meta", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.meta: Mapping[str, str] = _injected(span)

    def sent(self, request_id: RequestId | None, protocol_version: str | None) -> None:
        if self.span.is_recording():  # the caller may have given up before the actor sent it
            if request_id is not None:
                self.span.set_attribute("jsonrpc.request.id", str(request_id))
            if protocol_version is not None:
                self.span.set_attribute("mcp.protocol.version", protocol_version)

    def refused(self, code: int) -> None:
        self.span.set_attribute("error.type", str(code))
        self.span.set_attribute("rpc.response.status_code", str(code))

    def answered(self, outcome: CallOutcome) -> None:
        code = error_type(outcome)
        if code is not None:
            self.span.set_attribute("error.type", code)
            rpc = outcome.rpc_error if isinstance(outcome, CallFailed) else None
            if rpc is not None:
                self.span.set_attribute("rpc.response.status_code", str(rpc.code))


class _AttemptTrace:
    """A connection attempt's span: not current in any task (the attempt's tasks live
    on after it ends), its requests' parent by ``parent`` until it ends; and the
    session it opens, measured when it closes."""

    __slots__ = ("began", "failure", "metrics", "parent", "ready_at", "server", "span")

    def __init__(self, span: Span, metrics: OtelMetrics | None, server: str) -> None:
        self.span = span
        self.parent: otel_context.Context | None = trace.set_span_in_context(span, otel_context.Context())
        self.failure: str | None = None
        self.metrics, self.server = metrics, server
        self.began = time.perf_counter()
        self.ready_at: float | None = None

    def state(self, state: str, reason: str | None) -> tuple[str, str] | None:
        if reason is not None:
            self.failure = reason
        if self.parent is None:
            return None
        fields = {"state": state} if reason is None else {"state": state, "reason": reason}
        self.span.add_event("mcp_supervisor.state", fields)
        context = self.span.get_span_context()
        return trace.format_trace_id(context.trace_id), trace.format_span_id(context.span_id)

    def ready(self) -> None:
        if self.parent is not None:
            self.parent, self.ready_at, self.failure = None, time.perf_counter(), None
            self.span.end()

    def closed(self) -> None:
        if self.parent is not None:  # it never got ready
            self.parent = None
            self.span.set_attribute("error.type", "connection_failed")
            why = self.failure or "the attempt ended before the server was ready"
            self.span.set_status(StatusCode.ERROR, why)
            self.span.end()
        elif self.ready_at is not None and self.metrics is not None:
            attributes = {"mcp_supervisor.server": self.server}
            if self.failure is not None:
                attributes["error.type"] = "connection_failed"
            self.metrics.client_session.record(time.perf_counter() - self.began, attributes)


class _ServerTrace:
    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span

    def ended(self, code: str | None, status: int | None = None) -> None:
        if code is not None:
            self.span.set_attribute("error.type", code)
        if status is not None:
            self.span.set_attribute("rpc.response.status_code", str(status))


def _failed_by(exc: BaseException) -> str:
    """``error.type`` of a span its task left by an exception."""
    return "cancelled" if isinstance(exc, trio.Cancelled) else type(exc).__qualname__


class OtelTracing:
    """``SupervisorTracing`` (and the machinery's ``Tracing``) over the global tracer
    provider, looked up on each span so that a host may set its provider late."""

    def __init__(self, tracer: trace.Tracer | None = None, meters: OtelMetrics | None = None) -> None:
        self._tracer = tracer or trace.get_tracer("trio-mcp-supervisor")
        self._metrics = meters

    @contextmanager
    def _span(
        self, name: str, kind: SpanKind, attributes: dict[str, Any], parent: otel_context.Context | None
    ) -> Iterator[Span]:
        meters = None if kind is SpanKind.INTERNAL else self._metrics
        began = time.perf_counter() if meters is not None else 0.0
        with self._tracer.start_as_current_span(
            name, context=parent, kind=kind, attributes=attributes, record_exception=False
        ) as span:
            try:
                yield span
            except BaseException as exc:
                span.set_attribute("error.type", _failed_by(exc))
                raise
            finally:
                if meters is not None:  # a request's duration: mcp.{client,server}.operation.duration
                    meters.operation(kind is SpanKind.SERVER, time.perf_counter() - began, span)

    def session_ended(self, seconds: float, transport: str, protocol_version: str | None) -> None:
        if self._metrics is not None:
            attributes = {"network.transport": transport}
            if protocol_version is not None:
                attributes["mcp.protocol.version"] = protocol_version
            self._metrics.server_session.record(seconds, attributes)

    @contextmanager
    def call_span(self, kind: str, target: str, epoch: int) -> Iterator[None]:
        attributes = {**request_attributes(kind, target), "mcp_supervisor.epoch": epoch}
        with self._span(f"mcp_supervisor {kind} {target}", SpanKind.INTERNAL, attributes, None) as span:
            token = _CALL_SPAN.set(span)
            try:
                yield
            finally:
                _CALL_SPAN.reset(token)

    @contextmanager
    def client_span(self, spec: ServerSpec, call: CallTool) -> Iterator[_RequestTrace]:
        attributes = {**request_attributes(call.method, call.tool), **peer_attributes(spec)}
        with self._span(f"{call.method} {call.tool}", SpanKind.CLIENT, attributes, None) as span:
            yield _RequestTrace(span)

    @contextmanager
    def request_span(
        self, server: str, method: str, target: str, *, parent: object = None
    ) -> Iterator[_RequestTrace]:
        if not isinstance(parent, otel_context.Context):
            parent = otel_context.Context()  # a root span of its own
        attributes = {**request_attributes(method, target), "mcp_supervisor.server": server}
        name = f"{method} {target}" if target else method
        with self._span(name, SpanKind.CLIENT, attributes, parent) as span:
            yield _RequestTrace(span)

    def attempt_span(self, server: str) -> _AttemptTrace:
        attributes = {"mcp_supervisor.server": server}
        span = self._tracer.start_span(
            f"mcp_supervisor connect {server}", otel_context.Context(), SpanKind.INTERNAL, attributes
        )
        return _AttemptTrace(span, self._metrics, server)

    @contextmanager
    def approval_span(self, tool: str) -> Iterator[None]:
        attributes = {"gen_ai.tool.name": tool}
        with self._span("mcp_supervisor.approval", SpanKind.INTERNAL, attributes, None):
            yield

    @contextmanager
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
    ) -> Iterator[_ServerTrace]:
        parent = extract_parent(meta, headers)
        attributes = {**request_attributes(method, target), "network.transport": transport}
        if request_id is not None:
            attributes["jsonrpc.request.id"] = str(request_id)
        if session_id is not None:
            attributes["mcp.session.id"] = session_id
        if protocol_version is not None:
            attributes["mcp.protocol.version"] = protocol_version
        if client is not None:
            attributes["client.address"], attributes["client.port"] = client
        name = f"{method} {target}" if target else method
        with self._span(name, SpanKind.SERVER, attributes, parent) as span:
            yield _ServerTrace(span)

    def ended(self, server: str, decision: str, outcome: str) -> None:
        span = _CALL_SPAN.get()
        if span is None or not span.is_recording():
            return
        span.set_attribute("mcp_supervisor.trust.decision", decision)
        span.set_attribute("mcp_supervisor.envelope_code", outcome)
        if server:
            span.set_attribute("mcp_supervisor.server", server)
        if outcome != "ok":
            span.set_attribute("error.type", outcome)

    def decided(self, rule: int) -> None:
        span = _CALL_SPAN.get()
        if span is not None and span.is_recording():
            span.set_attribute("mcp_supervisor.trust.rule", rule)

    def trace_id(self) -> str | None:
        context = trace.get_current_span().get_span_context()
        return trace.format_trace_id(context.trace_id) if context.is_valid else None

    def current_ids(self) -> tuple[str, str] | None:
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        return trace.format_trace_id(context.trace_id), trace.format_span_id(context.span_id)

    def annotate(self, attributes: Mapping[str, str]) -> None:
        span = _CALL_SPAN.get()
        if span is not None and span.is_recording():
            span.set_attributes(attributes)


def extract_parent(
    meta: Mapping[str, Any] | None, headers: Mapping[str, str] | None = None
) -> otel_context.Context | None:
    """The parent a received request names: its ``params._meta``'s trace context, else
    its HTTP headers' (names in any case); None when it names none (the current one)."""
    if isinstance(meta, Mapping) and isinstance(meta.get("traceparent"), str):
        carrier = {key: meta[key] for key in TRACE_META_KEYS if isinstance(meta.get(key), str)}
    elif headers:
        lowered = {key.lower(): value for key, value in headers.items()}
        carrier = {key: lowered[key] for key in TRACE_META_KEYS if key in lowered}
        if "traceparent" not in carrier:
            return None
    else:
        return None
    return propagate.extract(carrier)


def provider_is_set() -> bool:
    """Whether a tracer provider that records was set as the global one (not the API's
    default proxy or its no-op)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def configure_from_environment(environ: Mapping[str, str] = os.environ) -> list[Any]:
    """For ``serve``, ``stdio`` and ``bridge``: a tracer provider and a meter provider
    from the standard ``OTEL_*`` variables, set as the global ones, for each that is
    asked for (``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER``: ``otlp``,
    ``console`` or ``none``; an ``OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]ENDPOINT`` alone
    means ``otlp``). Returns them (``shutdown()`` flushes each at exit)."""
    from opentelemetry.sdk.resources import Resource

    named = {} if environ.get("OTEL_SERVICE_NAME") else {"service.name": "mcp-supervisor"}
    resource = Resource.create(named)
    made = [_tracer_provider(environ, resource), _meter_provider(environ, resource)]
    return [provider for provider in made if provider is not None]


def check_exporters(environ: Mapping[str, str]) -> str | None:
    """The problem with ``OTEL_TRACES_EXPORTER`` or ``OTEL_METRICS_EXPORTER``, or None."""
    try:
        _exporters(environ, "traces")
        _exporters(environ, "metrics")
    except ValueError as exc:
        return str(exc)
    return None


def _exporters(environ: Mapping[str, str], signal: str) -> list[str]:
    """The exporters ``OTEL_{signal}_EXPORTER`` names (``otlp`` when only an endpoint is set)."""
    upper = signal.upper()
    endpoint = environ.get(f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT", environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    wanted = environ.get(f"OTEL_{upper}_EXPORTER") or ("otlp" if endpoint else "none")
    names = [name.strip() for name in wanted.split(",") if name.strip() not in ("", "none")]
    for name in names:
        if name not in ("otlp", "console"):
            raise ValueError(f"OTEL_{upper}_EXPORTER: unknown exporter {name!r} (otlp, console or none)")
    return names


def _tracer_provider(environ: Mapping[str, str], resource: Any) -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    names = _exporters(environ, "traces")
    if not names:
        return None
    exporters: list[SpanExporter] = []
    for name in names:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())  # reads OTEL_EXPORTER_OTLP_* itself
        else:
            exporters.append(ConsoleSpanExporter(out=sys.stderr))  # stdout is stdio's protocol
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


def _meter_provider(environ: Mapping[str, str], resource: Any) -> Any:
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        MetricReader,
        PeriodicExportingMetricReader,
    )

    names = _exporters(environ, "metrics")
    if not names:
        return None
    readers: list[MetricReader] = []
    for name in names:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
        else:
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter(out=sys.stderr)))
    provider = MeterProvider(resource=resource, metric_readers=readers)
    metrics.set_meter_provider(provider)
    return provider
