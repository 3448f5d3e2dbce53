"""Spans recorded in memory by the real OpenTelemetry SDK, for the trace tests: our
tracer over a provider of the test's own (the global one is set once per process, so
it is left alone), put where ``Supervisor.open`` would; and a count of spans started
against spans ended, which must be zero after every case."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from supervisor.runtime import tracing
from supervisor.runtime.otel import OtelTracing


class OpenSpans(SpanProcessor):
    """Counts spans started against spans ended: what is open now."""

    def __init__(self) -> None:
        self.started = self.ended = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started += 1

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1

    @property
    def open(self) -> int:
        return self.started - self.ended


class Traces:
    """What one test's spans went to."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.counter = OpenSpans()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.counter)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("host")

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> ReadableSpan:
        found = [span for span in self.spans() if span.name == name]
        assert len(found) == 1, [span.name for span in self.spans()]
        return found[0]

    def clear(self) -> None:
        self.exporter.clear()


@contextmanager
def recording() -> Iterator[Traces]:
    """Traces on, into a fresh ``Traces``, for the block."""
    made = Traces()
    before = tracing.TRACING.active
    tracing.TRACING.active = tracing.HOOK.tracing = OtelTracing(made.provider.get_tracer("ours"))
    try:
        yield made
    finally:
        tracing.TRACING.active = tracing.HOOK.tracing = before
