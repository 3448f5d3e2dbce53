"""One trace across real processes, each exporting over OTLP to a collector the test
runs (tests/support/otlp_collector.py). First, the collector itself: it reads what the
real OTLP/HTTP exporters send.
"""

from __future__ import annotations

import urllib.request

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.support.otlp_collector import MetricRecord, otlp_collector


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_the_collector_takes_what_the_real_exporters_send(compression: Compression) -> None:
    """Spans (either encoding) and metrics, from the OTLP/HTTP exporters themselves,
    each answered 200 with a body they accept (they say SUCCESS); and logs, so that a
    process sending every signal to ``OTEL_EXPORTER_OTLP_ENDPOINT`` meets no error."""
    provider = TracerProvider(resource=Resource.create({"service.name": "probe"}))
    finished = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(finished))
    tracer = provider.get_tracer("probe")
    with (
        tracer.start_as_current_span("outer", kind=SpanKind.SERVER) as outer,
        tracer.start_as_current_span("inner", attributes={"n": 3, "tags": ("a",)}),
    ):
        pass
    meters = InMemoryMetricReader()
    meter = MeterProvider(resource=Resource.create({"service.name": "probe"}), metric_readers=[meters])
    meter.get_meter("probe").create_counter("calls").add(2)
    with otlp_collector() as collector:
        spans = OTLPSpanExporter(endpoint=f"{collector.endpoint}/v1/traces", compression=compression)
        assert spans.export(finished.get_finished_spans()) is SpanExportResult.SUCCESS
        metrics = OTLPMetricExporter(endpoint=f"{collector.endpoint}/v1/metrics", compression=compression)
        data = meters.get_metrics_data()
        assert data is not None and metrics.export(data) is MetricExportResult.SUCCESS
        logs = urllib.request.Request(
            f"{collector.endpoint}/v1/logs",
            data=ExportLogsServiceRequest().SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
        )
        with urllib.request.urlopen(logs, timeout=5) as answer:
            assert answer.status == 200
    by_name, context = {span.name: span for span in collector.spans}, outer.get_span_context()
    assert by_name["outer"].kind is SpanKind.SERVER and not by_name["outer"].parent_span_id
    inner = by_name["inner"]
    assert (inner.trace_id, inner.parent_span_id) == (f"{context.trace_id:032x}", f"{context.span_id:016x}")
    assert (inner.service, inner.kind, inner.attributes) == (
        "probe",
        SpanKind.INTERNAL,
        {"n": 3, "tags": ("a",)},
    )
    assert collector.metrics == [MetricRecord("probe", "calls")] and collector.log_exports == 1
    assert not collector.refused
