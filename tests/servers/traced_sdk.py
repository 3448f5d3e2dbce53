"""Both ends of a traced call built on the official ``mcp`` SDK, each a process that
exports its spans over OTLP/HTTP where the standard ``OTEL_*`` variables say
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME``), as an instrumented
application would. The SDK traces on its own once a tracer provider is set: its server
makes a SERVER span per request (its parent from ``params._meta``), its client a CLIENT
span per request and sends its ``traceparent`` in ``params._meta``.

- ``serve PORT``: a Streamable HTTP server at ``http://127.0.0.1:PORT/mcp`` with one
  tool, ``echo`` (it returns its ``text``).
- ``call URL TOOL TEXT``: under a root span ``agent turn``, calls ``TOOL`` with
  ``{"text": TEXT}`` at ``URL`` over Streamable HTTP, and prints the answer's text
  (a failed call exits 1, saying why).

Spans are exported as each ends (a simple processor): nothing waits in a buffer for an
exit that a signal might cut short.
"""

from __future__ import annotations

import argparse
import logging

import anyio
from mcp.client.client import Client
from mcp.server.mcpserver import MCPServer
from mcp.types import TextContent
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

server = MCPServer("traced-sdk-server")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def export_spans() -> TracerProvider:
    """The global tracer provider, exporting to the OTLP endpoint ``OTEL_*`` names
    (the resource and the exporter read the variables themselves)."""
    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


async def call(url: str, tool: str, text: str) -> str:
    with trace.get_tracer("agent").start_as_current_span("agent turn"):
        async with Client(url) as client:
            result = await client.call_tool(tool, {"text": text})
    content = result.content[0] if result.content else None
    answer = content.text if isinstance(content, TextContent) else repr(result)
    if result.is_error:
        raise SystemExit(f"the call failed: {answer}")
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve").add_argument("port", type=int)
    calling = commands.add_parser("call")
    for name in ("url", "tool", "text"):
        calling.add_argument(name)
    args = parser.parse_args()
    provider = export_spans()
    try:
        if args.command == "serve":
            logging.disable(logging.WARNING)
            server.run("streamable-http", port=args.port)
        else:
            print(anyio.run(call, args.url, args.tool, args.text))
    finally:
        provider.shutdown()


if __name__ == "__main__":
    main()
