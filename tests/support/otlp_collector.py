"""A small OTLP/HTTP collector on loopback, for tests whose processes export traces.

Real processes export with the real OTLP exporter (protobuf over HTTP, gzip or not);
this receives it on a free 127.0.0.1 port, in a thread of its own (the exporters are
other processes, so nothing here shares the test's event loop), and keeps each span as
a plain ``SpanRecord``. ``/v1/metrics`` and ``/v1/logs`` are accepted too (200, an empty
protobuf answer), so a process told only ``OTEL_EXPORTER_OTLP_ENDPOINT`` never sees an
error whatever signals it sends; metric names are kept, logs are counted.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.trace import SpanKind


@attrs.frozen
class SpanRecord:
    """One span as received: ids in lower-case hex, ``parent_span_id`` empty for a root."""

    service: str
    name: str
    kind: SpanKind
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: Mapping[str, Any]


@attrs.frozen
class MetricRecord:
    """One metric as received (its name; the points are not kept)."""

    service: str
    name: str


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(_value(item) for item in value.array_value.values)
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, which) if which else None


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _service(resource: Resource) -> str:
    return str(_attributes(resource.attributes).get("service.name", ""))


def spans_of(request: ExportTraceServiceRequest) -> list[SpanRecord]:
    """The spans of one export, each with its resource's ``service.name``."""
    found = []
    for resource_spans in request.resource_spans:
        service = _service(resource_spans.resource)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    SpanRecord(
                        service=service,
                        name=span.name,
                        kind=SpanKind(max(span.kind - 1, 0)),  # the proto's 0 is "unspecified"
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        attributes=_attributes(span.attributes),
                    )
                )
    return found


def metrics_of(request: ExportMetricsServiceRequest) -> list[MetricRecord]:
    return [
        MetricRecord(_service(resource_metrics.resource), metric.name)
        for resource_metrics in request.resource_metrics
        for scope_metrics in resource_metrics.scope_metrics
        for metric in scope_metrics.metrics
    ]


class Collector:
    """What the collector received so far; ``endpoint`` is for ``OTEL_EXPORTER_OTLP_ENDPOINT``."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.spans: list[SpanRecord] = []
        self.metrics: list[MetricRecord] = []
        self.log_exports = 0
        self.refused: list[str] = []
        """Requests it could not take (path or body), to name in a failed assertion."""
        self._changed = threading.Condition()

    def received(
        self, spans: Iterable[SpanRecord] = (), metrics: Iterable[MetricRecord] = (), logs: int = 0
    ) -> None:
        with self._changed:
            self.spans += spans
            self.metrics += metrics
            self.log_exports += logs
            self._changed.notify_all()

    def refuse(self, what: str) -> None:
        with self._changed:
            self.refused.append(what)
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[list[SpanRecord]], bool], timeout: float) -> list[SpanRecord]:
        """Block until ``predicate`` accepts the spans received (woken by each export,
        no polling); those spans. Fails, showing what came, after ``timeout`` seconds."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(list(self.spans)), timeout):
                seen = [(span.service, span.name) for span in self.spans]
                raise AssertionError(f"not within {timeout} s; spans {seen}, refused {self.refused}")
            return list(self.spans)


_SIGNALS: dict[str, tuple[type[Any], bytes]] = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse().SerializeToString()),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse().SerializeToString()),
    "/v1/logs": (ExportLogsServiceRequest, ExportLogsServiceResponse().SerializeToString()),
}


def _handler(collector: Collector) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # the exporters keep their connection open

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                self.rfile.readline()
                body = b"".join(chunks)
            else:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding", "").lower() == "gzip":
                body = gzip.decompress(body)
            return body

        def _answer(self, status: int, body: bytes = b"") -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            body = self._body()
            known = _SIGNALS.get(self.path)
            content_type = self.headers.get("Content-Type", "")
            if known is None or content_type.split(";")[0].strip() != "application/x-protobuf":
                collector.refuse(f"POST {self.path} ({content_type})")
                self._answer(404 if known is None else 415)
                return
            message_type, empty_answer = known
            try:
                message = message_type.FromString(body)
            except Exception as exc:  # a body that is no such message: said, and refused
                collector.refuse(f"POST {self.path}: {exc!r}")
                self._answer(400)
                return
            if isinstance(message, ExportTraceServiceRequest):
                collector.received(spans=spans_of(message))
            elif isinstance(message, ExportMetricsServiceRequest):
                collector.received(metrics=metrics_of(message))
            else:
                collector.received(logs=1)
            self._answer(200, empty_answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the test names what matters

    return Handler


@contextmanager
def otlp_collector() -> Iterator[Collector]:
    """A collector on a free loopback port for the block."""
    collector = Collector("")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(collector))
    server.daemon_threads = True
    collector.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    # a short poll: shutdown() waits for the loop to notice, 0.5 s by default
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), name="otlp-collector", daemon=True)
    thread.start()
    try:
        yield collector
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
