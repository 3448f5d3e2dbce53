"""One trace across three real processes, each exporting over OTLP to a collector the
test runs (tests/support/otlp_collector.py): the official SDK's client, which opens a
root span ``agent turn`` and sends its ``traceparent`` in ``params._meta``; ``/mcp`` of a
real ``mcp-supervisor serve`` told nothing of tracing but the standard ``OTEL_*``
variables; and a remote server built on the official SDK, over Streamable HTTP, which
makes a SERVER span per request (tests/servers/traced_sdk.py, both SDK ends).

Walking up the parent ids from the SDK server's span must reach the client's root
through our CLIENT span and our SERVER span, in that order, all in one trace.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import pytest
import trio
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

from tests.end_to_end.test_real_peers import needs_module
from tests.support.admin import Http, wait_for
from tests.support.golden_config import CLI
from tests.support.http_processes import free_port, listening_process
from tests.support.otlp_collector import Collector, MetricRecord, SpanRecord, otlp_collector
from tests.support.paths import SERVERS

pytestmark = pytest.mark.real_peer
TRACED = str(SERVERS / "traced_sdk.py")
WAIT_S = 30.0
SERVICES = {"agent": "agent", "serve": "edge-gateway", "server": "sdk-server"}
"""The ``OTEL_SERVICE_NAME`` of each process."""


def exporting(collector: Collector, service: str, **more: str) -> dict[str, str]:
    """This process's environment with no tracing settings of its own (nor a proxy,
    nor our config variables), told only where the collector is and its service name."""
    ours = ("OTEL_", "MCP_SUPERVISOR")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(ours) and key.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    return {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_SERVICE_NAME": service, **more}


@asynccontextmanager
async def serving(config: Mapping[str, object], env: Mapping[str, str], tmp_path: Path) -> AsyncIterator[str]:
    """``mcp-supervisor serve`` on a free loopback port for the block; its URL once
    every server is steady. Leaving the block stops it as an operator does (SIGTERM:
    it drains, and flushes its spans), and checks it exited cleanly."""
    path = tmp_path / "config.json"
    path.write_bytes(orjson.dumps(config))
    log = tmp_path / "serve.log"  # a file: a pipe nobody reads would fill up
    command = [*CLI, "serve", "--config", str(path), "--bind", "127.0.0.1:0", "--state-dir", str(tmp_path)]
    with log.open("wb") as stderr:
        process = await trio.lowlevel.open_process(command, stdin=subprocess.DEVNULL, stderr=stderr, env=env)
    try:
        with trio.fail_after(WAIT_S):
            while "admin api listening url=" not in log.read_text():
                assert process.poll() is None, log.read_text()
                await trio.sleep(0.02)
        url = log.read_text().split("admin api listening url=")[1].split()[0]
        await wait_for(
            Http(url),
            "/v1/servers",
            lambda body: all(server["state"] == "steady" for server in body["servers"]),
            WAIT_S,
        )
        yield url
    finally:
        with trio.CancelScope(shield=True):
            process.send_signal(signal.SIGTERM)
            with trio.move_on_after(WAIT_S):
                await process.wait()
            if process.poll() is None:
                process.kill()
                await process.wait()
    assert process.returncode == 0, log.read_text()


def path_to_root(spans: list[SpanRecord], start: SpanRecord) -> list[SpanRecord]:
    """``start`` and its ancestors up to its trace's root, by parent ids."""
    by_id = {span.span_id: span for span in spans}
    path = [start]
    while path[-1].parent_span_id:
        parent = by_id.get(path[-1].parent_span_id)
        assert parent is not None, f"the parent of {path[-1]} was never exported; path so far {path}"
        path.append(parent)
    return path


def one(spans: list[SpanRecord], service: str, kind: SpanKind, name: str) -> SpanRecord:
    found = [span for span in spans if (span.service, span.kind, span.name) == (service, kind, name)]
    assert len(found) == 1, (service, kind, name, [(s.service, s.kind, s.name) for s in spans])
    return found[0]


def has(service: str, name: str) -> Callable[[list[SpanRecord]], bool]:
    return lambda spans: any((span.service, span.name) == (service, name) for span in spans)


async def test_one_trace_runs_from_the_sdk_client_through_serve_to_the_sdk_server(tmp_path: Path) -> None:
    needs_module("mcp")
    with otlp_collector() as collector:
        port = free_port()
        server_env = exporting(collector, SERVICES["server"])
        command = [sys.executable, TRACED, "serve", str(port)]
        async with listening_process(command, port, "traced_sdk.py serve", env=server_env):
            traced = {
                "type": "remote",
                "url": f"http://127.0.0.1:{port}/mcp",
                "transport": "streamable-http",
                "start": "eager",
                "trusted": True,
            }
            serve_env = exporting(collector, SERVICES["serve"])
            async with serving({"servers": {"traced": traced}}, serve_env, tmp_path) as url:
                # gzip on this one: the collector reads both encodings the exporter sends
                agent_env = exporting(collector, SERVICES["agent"], OTEL_EXPORTER_OTLP_COMPRESSION="gzip")
                call = [sys.executable, TRACED, "call", f"{url}/mcp", "traced_echo", "across processes"]
                with trio.fail_after(WAIT_S):
                    done = await trio.run_process(
                        call, env=agent_env, capture_stdout=True, capture_stderr=True, check=False
                    )
                assert done.returncode == 0, done.stderr.decode()
                assert done.stdout.decode().strip() == "across processes"
        # Every process has exited (serve flushed its spans on SIGTERM) but the SDK
        # server, which exported each span as it ended: all that will come is here.
        far_ends = (
            has(SERVICES["agent"], "agent turn"),
            has(SERVICES["serve"], "tools/call echo"),
            has(SERVICES["server"], "tools/call echo"),
        )
        spans = await trio.to_thread.run_sync(
            lambda: collector.wait_for(lambda spans: all(check(spans) for check in far_ends), 5)
        )
    assert not collector.refused, collector.refused

    far_end = one(spans, SERVICES["server"], SpanKind.SERVER, "tools/call echo")
    root = one(spans, SERVICES["agent"], SpanKind.INTERNAL, "agent turn")
    ours = one(spans, SERVICES["serve"], SpanKind.CLIENT, "tools/call echo")
    traces = {"agent": root.trace_id, "serve": ours.trace_id, "server": far_end.trace_id}
    assert len(set(traces.values())) == 1, f"not one trace: {traces}"
    path = path_to_root(spans, far_end)
    # our INTERNAL spans may stand between our SERVER span and our CLIENT span
    hops = [
        (span.service, span.kind, span.name)
        for span in path
        if not (span.service == SERVICES["serve"] and span.kind is SpanKind.INTERNAL)
    ]
    assert hops == [
        (SERVICES["server"], SpanKind.SERVER, "tools/call echo"),
        (SERVICES["serve"], SpanKind.CLIENT, "tools/call echo"),
        (SERVICES["serve"], SpanKind.SERVER, "tools/call traced_echo"),
        (SERVICES["agent"], SpanKind.CLIENT, "MCP send tools/call traced_echo"),
        (SERVICES["agent"], SpanKind.INTERNAL, "agent turn"),
    ], [(span.service, span.kind, span.name) for span in path]
    assert ours.attributes["server.address"] == "127.0.0.1"
    assert ours.attributes["server.port"] == port
    assert ours.attributes["mcp_supervisor.server"] == "traced"
    # the same endpoint took serve's metrics (flushed at exit), by the conventions' names
    exported = {metric.name for metric in collector.metrics if metric.service == SERVICES["serve"]}
    assert {
        "mcp.server.operation.duration",
        "mcp.client.operation.duration",
        "mcp.client.session.duration",
    } <= exported, exported


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
